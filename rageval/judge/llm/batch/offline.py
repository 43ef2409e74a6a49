"""Batch files without a provider: the batch a run would send written to a file
(``--judge-batch-file``) for an offline batch runner that reads OpenAI's batch JSONL (vLLM's
``python -m vllm.entrypoints.openai.run_batch -i IN -o OUT``), and that runner's output read
into the cache (``rageval cache import OUT --batch-input IN``), each reply under its line's
custom_id: the cache key an online reply of the same request gets."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.core.errors import MOST_SAMPLES, InputError, UsageError
from rageval.judge.llm.batch.lines import body_of, read_outcomes, request_line
from rageval.judge.llm.cache.entries import cache_key
from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.transport.sdk import read_reply

if TYPE_CHECKING:
    from rageval.judge.llm.cache.store import JudgeCache, NewReply
    from rageval.judge.llm.options import JudgeOptions
    from rageval.judge.llm.units import Unit

__all__ = ["import_batch_output", "is_batch_output", "write_batch_file"]


def write_batch_file(judge: JudgeOptions, pending: Sequence[Unit],
                     schema: ReplySchema) -> str:
    """Add the lines of ``pending`` that ``judge.batch_file`` lacks to it, in the first wire
    format of the run's ladder; why their records are left unscored."""
    path = Path(judge.batch_file or "")
    have = _custom_ids(path)
    fmt = judge.ladder[0]
    lines = []
    for unit in pending:
        custom_id = unit.keys[fmt]
        if custom_id in have:
            continue
        have.add(custom_id)
        wire = (unit.schema or schema).wire(fmt)
        lines.append(request_line(custom_id, body_of(judge.model or "", unit.messages,
                                                     judge.params(unit.sample), wire)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as out:
            out.writelines(lines)
    except OSError as exc:
        raise UsageError(f"--judge-batch-file {path}: cannot write: "
                         f"{exc.strerror or exc}") from None
    return (f"not asked: written to {path} for an offline batch runner (import its output "
            f"with 'rageval cache import OUTPUT --batch-input {path}')")


def _custom_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {line["custom_id"] for _, line in _read_lines(path)}


def is_batch_output(path: str | os.PathLike[str]) -> bool:
    """Whether a JSONL file's first line is a batch output line (``custom_id``, ``response``)."""
    try:
        with open(path, encoding="utf-8") as fh:
            first = next((line for line in fh if line.strip()), "")
        line = json.loads(first)
    except (OSError, ValueError):
        return False
    return isinstance(line, dict) and "custom_id" in line and "response" in line


def import_batch_output(cache: JudgeCache, output: str | os.PathLike[str],
                        batch_input: str | os.PathLike[str]) -> dict[str, int]:
    """Store the good lines of a batch runner's ``output`` in ``cache``, each matched by its
    custom_id to its request in ``batch_input`` (the batch file rageval wrote); every line is
    checked before anything is stored. ``{"read", "added", "failed"}``: lines read, replies
    newly stored, lines that carry no reply."""
    requests = {line["custom_id"]: (n, line["body"]) for n, line in _read_lines(batch_input)}
    text = _read_text(output)
    outcomes = read_outcomes([text])
    replies: list[NewReply] = []
    failed = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        custom_id = _custom_id(raw)
        if custom_id is None:
            continue
        if custom_id not in requests:
            raise InputError(f"custom_id {custom_id!r} is not a request of {batch_input}",
                             path=str(output), line=lineno, field="custom_id")
        outcome = outcomes[custom_id]
        try:
            reply = read_reply(outcome.body) if outcome.ok and outcome.body else None
        except ValueError:  # not a chat reply: a line without a reply, as a failed one
            reply = None
        if reply is None or reply.text is None:
            failed += 1
            continue
        n, body = requests[custom_id]
        summary = _summary(body, custom_id, str(batch_input), n)
        meta = {"via": "batch", "format": _format(body.get("response_format")),
                "finish_reason": reply.finish_reason, "served_model": reply.model,
                "batch_file": Path(output).name}
        request_id = cache_key(summary["model"], summary["messages"], summary["params"], None,
                               summary["sample_index"])  # its key with no response format
        replies.append((custom_id, summary, reply.text, reply.usage, meta, request_id))
    added = cache.put_many(replies) if replies else 0
    return {"read": len(outcomes), "added": added, "failed": failed}


def _custom_id(raw: str) -> str | None:
    try:
        line = json.loads(raw) if raw.strip() else None
    except ValueError:
        return None
    return line.get("custom_id") if isinstance(line, dict) else None


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                         path=str(path)) from None


def _read_lines(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """The request lines of a batch file, each checked (its custom_id and body)."""
    out = []
    text = _read_text(path)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"not JSON: {exc}", path=str(path), line=lineno) from None
        for name, kind in (("custom_id", str), ("body", dict)):
            if not isinstance(line, dict) or not isinstance(line.get(name), kind):
                raise InputError(f"a batch request line needs a {name}", path=str(path),
                                 line=lineno, field=name)
        out.append((lineno, line))
    return out


def _summary(body: dict[str, Any], custom_id: str, src: str, lineno: int) -> dict[str, Any]:
    """The request summary an online reply of this body is stored with; the sample index is
    the one whose cache key is the line's custom_id."""
    model, messages = body.get("model"), body.get("messages")
    response_format = body.get("response_format")
    params = {k: v for k, v in body.items() if k not in ("model", "messages", "response_format")}
    if not (isinstance(model, str) and model and isinstance(messages, list)):
        raise InputError("a batch request needs a model and messages", path=src, line=lineno,
                         field="body")
    for sample in range(MOST_SAMPLES):
        if cache_key(model, messages, params, response_format, sample) == custom_id:
            return {"model": model, "messages": messages, "params": params,
                    "response_format": response_format, "sample_index": sample}
    raise InputError("its custom_id is not the cache key of its request (not a batch file "
                     "rageval wrote, or one changed since)", path=src, line=lineno,
                     field="custom_id")


def _format(response_format: Any) -> str:
    """The wire format a request's ``response_format`` is
    (:mod:`~rageval.judge.llm.transport.formats`)."""
    if not isinstance(response_format, dict):
        return "text"
    if response_format.get("type") == "json_object":
        return "json_object+schema" if "schema" in response_format else "json_object"
    return str(response_format.get("type"))
