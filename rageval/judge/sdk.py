"""Reading what the openai SDK hands back: an endpoint's error text, whether an error is
permanent, and log-probabilities in the compact form the cache keeps."""

from __future__ import annotations

import re
from typing import Any

import openai

__all__ = ["compact_logprobs", "error_text", "is_permanent", "is_transient"]

# A 400 that is about one request's length, not about the endpoint: that request fails (and
# its record is unscored), the others go on.
_TOO_LONG = re.compile(r"context (?:length|window)|maximum context|too many tokens|"
                       r"exceeds? (?:the )?(?:context|maximum)|prompt is too long", re.IGNORECASE)


def compact_logprobs(logprobs: Any) -> list[list[Any]] | None:
    """``choice.logprobs.content`` as ``[[token, logprob, [[alt, logprob], ...]], ...]``, or
    None when the endpoint sent none (compact lists keep the cache small)."""
    content = getattr(logprobs, "content", None) if logprobs is not None else None
    if not content:
        return None
    out: list[list[Any]] = []
    for item in content:
        alternatives = [[alt.token, float(alt.logprob)]
                        for alt in (getattr(item, "top_logprobs", None) or [])]
        out.append([item.token, float(item.logprob), alternatives])
    return out


def error_text(exc: openai.APIStatusError) -> str:
    """The endpoint's own error message (falls back to the SDK's)."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return str(exc.message)


def is_permanent(exc: openai.APIStatusError) -> bool:
    """401/403/404, 400 and other 4xx (except 408/409/429 and a 400 saying that one prompt is
    too long for the model), and 429 for exhausted quota."""
    status = exc.status_code
    if status == 429:
        return exc.code == "insufficient_quota" or exc.type == "insufficient_quota"
    if status in (408, 409):
        return False
    if status == 400 and _TOO_LONG.search(error_text(exc)):
        return False
    return 400 <= status < 500


def is_transient(exc: openai.APIStatusError) -> bool:
    """A fault worth another attempt: what the SDK retries (408, 409, 429, every 5xx), an
    exhausted quota excepted."""
    if is_permanent(exc):
        return False
    return exc.status_code in (408, 409, 429) or exc.status_code >= 500
