"""How many prompt tokens a judge request will cost, before it is sent (``--dry-run``).

The endpoint's own tokenizer counts each message where the endpoint offers one: llama.cpp's
``POST /tokenize`` and llama-cpp-python's ``POST /extras/tokenize/count``, at the server's root.
To the messages' tokens the count adds the chat template's framing: ChatML's (the template of
SmolLM2, Qwen and many open models) opens each message with ``<|im_start|>role`` and a newline
and closes it with ``<|im_end|>`` and a newline (5 tokens a message), and opens the reply (4
more). Measured against the usage SmolLM2-135M-Instruct reports through llama-cpp-python, that
framing is exact (14 tokens for a system and a user message). An endpoint without a tokenizer
(OpenAI's, most gateways) gets an estimate of 4 characters a token, the rule of thumb for
English text with OpenAI's tokenizers: the method is named beside every figure. An endpoint
that cannot be reached at all (a refused connection, an unknown host) is told apart from one
without a tokenizer: :attr:`PromptTokens.unreachable` says why, for a dry run to report that the
real run would fail.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rageval.judge.llm.transport.endpoint import Endpoint

__all__ = ["PromptTokens"]

# ChatML's framing: per message, and once for the reply's opening.
PER_MESSAGE = 5
PER_REPLY = 4
CHARS_PER_TOKEN = 4
# The tokenizer routes tried, in order: (path, request body key, reply key).
_ROUTES = (("/extras/tokenize/count", "input", "count"), ("/tokenize", "content", "tokens"))
_TIMEOUT = 10.0


class PromptTokens:
    """Counts the prompt tokens of requests to one endpoint (``base_url``; ``api_key`` is sent
    as a Bearer token where there is one): :attr:`method` says how."""

    def __init__(self, base_url: str | None, api_key: str | None = None) -> None:
        self._endpoint = Endpoint.of(base_url)
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # Why the endpoint could not be reached at all (None: it answered).
        self.unreachable: str | None = None
        self._route = self._find_route()
        self._known: dict[str, int] = {}  # a rubric's system message is the same every time
        why = (f"the endpoint could not be reached: {self.unreachable}" if self.unreachable
               else "the endpoint offers no tokenizer")
        self.method = ("the endpoint's tokenizer, plus ChatML's framing" if self._route
                       else f"{CHARS_PER_TOKEN} characters a token ({why}), plus ChatML's "
                            "framing")

    def count(self, messages: Sequence[dict[str, str]]) -> int:
        """The prompt tokens of one request's messages."""
        return (sum(self._text(m.get("content") or "") for m in messages)
                + PER_MESSAGE * len(messages) + PER_REPLY)

    def _text(self, text: str) -> int:
        if self._route is None:
            return -(-len(text) // CHARS_PER_TOKEN)
        if text not in self._known:
            path, key, reply = self._route
            try:
                value = self._post(path, {key: text})
            except (OSError, ValueError):  # urllib's URLError is an OSError
                # The tokenizer stopped answering: the rest is estimated, and the method says so.
                self._route = None
                self.method = (f"the endpoint's tokenizer until it failed, then "
                               f"{CHARS_PER_TOKEN} characters a token, plus ChatML's framing")
                return self._text(text)
            self._known[text] = int(value if reply == "count" else len(value))
        return self._known[text]

    def _find_route(self) -> tuple[str, str, str] | None:
        for path, key, reply in _ROUTES:
            try:
                found = self._post(path, {key: "ok"}, reply)
            except (OSError, ValueError) as error:  # urllib's URLError is an OSError
                why = _unreachable(error)
                if why is not None:  # nothing answers there: no other route will
                    self.unreachable = self._endpoint.redact(why)
                    return None
                continue
            if found is not None:
                return path, key, reply
        return None

    def _post(self, path: str, body: dict[str, str], reply: str | None = None) -> Any:
        """The reply's ``reply`` field (default: the route's own) of a POST at the root."""
        import urllib.request  # with http.client and ssl: only where a tokenizer is asked

        key = reply or (self._route[2] if self._route else "count")
        request = urllib.request.Request(self._root() + path, data=json.dumps(body).encode(),
                                         headers=self._headers, method="POST")
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
            data = json.loads(response.read())
        if not isinstance(data, dict) or key not in data:
            raise ValueError(f"no {key!r} in the tokenizer's reply")
        return data[key]

    def _root(self) -> str:
        """The server's root: the base URL without its ``/v1`` (and never its query)."""
        parts = urlsplit(self._endpoint.base_url)
        path = parts.path[:-3] if parts.path.endswith("/v1") else parts.path
        return urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))


def _unreachable(error: BaseException) -> str | None:
    """Why nothing can answer at that address (a refused connection, an unknown host), or None
    when a server did answer or may yet (an HTTP error status, a reply that is not what was
    asked, a timeout: a slow tokenizer says nothing of the chat endpoint)."""
    import urllib.error

    if isinstance(error, urllib.error.HTTPError | ValueError):
        return None
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, ConnectionRefusedError):
        return "the connection was refused: nothing listens there"
    if isinstance(reason, socket.gaierror):
        return f"the host name cannot be resolved: {reason}"
    return None
