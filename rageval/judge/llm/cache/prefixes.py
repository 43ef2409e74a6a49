"""The messages of a request hashed for its cache key, the part it shares with the requests
before it hashed once.

A run's requests for one rubric share most of their text: the same system message, and a user
message that starts with the rubric's instructions (the record comes last, see
:mod:`rageval.judge.prompting.layout`). Their canonical JSON (see
:mod:`~rageval.judge.llm.cache.entries`) therefore starts the same way, and SHA-256 can be
carried from a shared start: :func:`hashed_messages` keeps, for each run of leading messages,
the digest of the document up to the longest start of the last message's content that the
requests seen so far share, and hashes only the rest of each request. The digest is the one of
the whole text, however it is cut: JSON escapes a string character by character, so the
escaped content is its start's escape followed by its rest's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["encoded_messages", "hashed_messages"]

# A string's canonical JSON (what JSONEncoder.encode gives a str without ensure_ascii).
_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]
# Shared starts shorter than this are not kept: hashing them costs less than keeping them.
_MIN_SHARED = 64
_MAX_KEPT = 64  # runs of leading messages remembered (a run has one per rubric or step)


class _Shared(NamedTuple):
    """The start of the last message's content that the requests after ``lead`` shared so
    far, and the digest of the document up to it (its escape without the closing quote);
    with none shared, ``probe``: the last content, which the next is compared with."""

    text: str
    digest: Any
    probe: str | None = None


# Leading messages -> what their requests share. Its entries depend on the messages alone,
# never on a run: a digest of the same text is the same digest.
_SHARED: dict[tuple[tuple[str, str], ...], _Shared] = {}


def _plain(message: Mapping[str, Any]) -> bool:
    """A chat message of a role and a content, both strings (how rageval writes them)."""
    return (type(message) is dict and len(message) == 2 and type(message.get("role")) is str
            and type(message.get("content")) is str)


def encoded_messages(messages: Iterable[Mapping[str, Any]],
                     canonical: Any) -> str:
    """The canonical JSON of the messages (``canonical``: the canonical encoder of anything
    else than a plain chat message)."""
    parts = []
    for message in messages:
        if _plain(message):
            parts.append(f'{{"content":{_encode_str(message["content"])},'
                         f'"role":{_encode_str(message["role"])}}}')
        else:
            parts.append(canonical(dict(message)))
    return f"[{','.join(parts)}]"


def hashed_messages(messages: Iterable[Mapping[str, Any]], canonical: Any) -> Any:
    """A SHA-256 object fed ``{"messages":`` and the messages' canonical JSON. Raises
    ``TypeError`` or ``ValueError`` (a lone surrogate) as encoding them would."""
    listed = messages if type(messages) is list else list(messages)
    if len(listed) < 2 or not all(_plain(m) for m in listed):
        text = '{"messages":' + encoded_messages(listed, canonical)
        return hashlib.sha256(text.encode("utf-8"))
    lead = tuple((m["role"], m["content"]) for m in listed[:-1])
    content, role = listed[-1]["content"], listed[-1]["role"]
    shared = _SHARED.get(lead)
    if (shared is None or not content.startswith(shared.text)
            or (not shared.text and shared.probe is not None)):
        shared = _learn(lead, shared, content)
    digest = shared.digest.copy()
    rest = _encode_str(content[len(shared.text):])[1:]  # its closing quote kept
    digest.update(f'{rest},"role":{_encode_str(role)}}}]'.encode())
    return digest


def _learn(lead: tuple[tuple[str, str], ...], kept: _Shared | None, content: str) -> _Shared:
    """What the requests after ``lead`` share once ``content`` is one of them: all of
    ``content`` for the first; then the start of what they shared that ``content`` shares too
    (when nothing worth keeping is shared, the start it shares with the next request is
    looked for)."""
    if kept is None:
        length = len(content)
    elif kept.text:
        length = _common_length(kept.text, content)
    else:
        length = 0 if kept.probe is None else _common_length(kept.probe, content)
    if length < _MIN_SHARED:
        if kept is not None and not kept.text:  # its digest is that of an empty start
            shared = kept._replace(probe=content)
            _SHARED[lead] = shared
            return shared
        length = 0
    text = content[:length]
    start = "".join(f'{{"content":{_encode_str(c)},"role":{_encode_str(r)}}},' for r, c in lead)
    head = '{"messages":[' + start + '{"content":' + _encode_str(text)[:-1]
    shared = _Shared(text, hashlib.sha256(head.encode()), None if length else content)
    if len(_SHARED) >= _MAX_KEPT:
        _SHARED.clear()
    _SHARED[lead] = shared
    return shared


def _common_length(a: str, b: str) -> int:
    """The length of the longest common start of ``a`` and ``b`` (by halves: each look is one
    comparison in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if b.startswith(a[:mid]):
            low = mid
        else:
            high = mid - 1
    return low
