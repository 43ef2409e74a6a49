"""The lines of a batch: one JSONL request line per judge request (its ``custom_id`` the
request's cache key in the wire format it is sent in, its body exactly what the online client
sends), the batches they are split into at the provider's limits, and the outcome of each
line read back from the output and error files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ENDPOINT", "MAX_BYTES", "MAX_REQUESTS", "LineOutcome", "body_of",
           "read_outcomes", "request_line", "split"]

#: The chat endpoint every batch line is addressed to.
ENDPOINT = "/v1/chat/completions"
#: The provider's limits on one batch (OpenAI's): requests, and bytes of its input file. Read
#: when a batch is split, so that a test may lower them.
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
# The error codes of lines a batch never ran (it expired, or was cancelled, first).
_NOT_RUN = frozenset({"batch_expired", "batch_cancelled"})


def body_of(model: str, messages: Sequence[dict[str, Any]], params: dict[str, Any],
            wire: dict[str, Any] | None) -> dict[str, Any]:
    """The chat request body the online client sends: the model, the messages, every
    parameter of the cache key, and the response format of the wire format (none for text)."""
    body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages], **params}
    if wire is not None:
        body["response_format"] = wire
    return body


def request_line(custom_id: str, body: dict[str, Any]) -> bytes:
    """One line of a batch's input file (its newline included)."""
    line = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def split(lines: Sequence[tuple[str, bytes]], max_requests: int | None = None,
          max_bytes: int | None = None) -> list[list[tuple[str, bytes]]]:
    """``(custom_id, line)`` pairs in batches of at most ``max_requests`` lines and
    ``max_bytes`` bytes (default: :data:`MAX_REQUESTS`, :data:`MAX_BYTES`), in order. A line
    longer than the byte limit goes alone (the provider then says what it thinks of it)."""
    most = MAX_REQUESTS if max_requests is None else max_requests
    room = MAX_BYTES if max_bytes is None else max_bytes
    out: list[list[tuple[str, bytes]]] = []
    size = 0
    for pair in lines:
        if not out or len(out[-1]) >= most or (out[-1] and size + len(pair[1]) > room):
            out.append([])
            size = 0
        out[-1].append(pair)
        size += len(pair[1])
    return out


@dataclass
class LineOutcome:
    """What came back for one line: the chat reply's JSON object (``status`` 200), or the
    provider's reason it failed."""

    custom_id: str
    status: int | None = None
    body: dict[str, Any] | None = None
    error: str | None = None
    # The provider never ran it: its batch expired or was cancelled first (OpenAI writes such
    # a line to the error file with code batch_expired or batch_cancelled).
    unfinished: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 200 and isinstance(self.body, dict) and self.error is None


def read_outcomes(texts: Iterable[str]) -> dict[str, LineOutcome]:
    """The outcome of each line of a batch's output and error files (JSONL, by custom_id);
    an unreadable line is skipped (its request then counts as unanswered)."""
    out: dict[str, LineOutcome] = {}
    for text in texts:
        for raw in text.splitlines():
            try:
                line = json.loads(raw) if raw.strip() else None
            except ValueError:
                continue
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                outcome = _outcome(line)
                if outcome.custom_id not in out or outcome.ok:
                    out[outcome.custom_id] = outcome
    return out


def _outcome(line: dict[str, Any]) -> LineOutcome:
    custom_id = line["custom_id"]
    response = line.get("response") if isinstance(line.get("response"), dict) else {}
    status = response.get("status_code")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    body = response.get("body")
    error = line.get("error")
    if isinstance(error, dict) and (error.get("message") or error.get("code")):
        code = error.get("code")
        why = str(error.get("message") or code)
        return LineOutcome(custom_id, status, None, f"{code}: {why}" if code and status is None
                           and str(code) not in why else why, unfinished=code in _NOT_RUN)
    if status == 200 and isinstance(body, dict):
        return LineOutcome(custom_id, 200, body)
    # The error body is kept: a parameter refusal is read from its code and param.
    return LineOutcome(custom_id, status, body if isinstance(body, dict) else None,
                       _error_words(body, status))


def _error_words(body: Any, status: int | None) -> str:
    """The endpoint's words in a failed line's body (as the online client reads them)."""
    inner = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return inner["message"]
    if isinstance(inner, str) and inner:
        return inner
    return f"HTTP {status}" if status is not None else "no response"
