"""The JSON a judge replies with, read tolerantly: the objects a reply offers as its verdict
(:func:`reply_objects`), the reason two disagreeing verdicts leave it unscored
(:func:`conflict`), and an offending value as a reason quotes it (:func:`shown`). The rubric
judge, the pairwise judge and the claim-level steps all read their replies through these.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["conflict", "reply_objects", "shown"]

# Tolerant: control characters (a raw newline) inside strings are read as they are. Strict
# JSON forbids them, and llama.cpp's JSON grammar lets a small model write them.
_DECODER = json.JSONDecoder(strict=False)
_SHOWN = 80  # characters of an offending value quoted in an error


def shown(value: Any) -> str:
    """A value of a reply as an unscored reason quotes it (JSON, cut to a short length)."""
    text = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in ``text``, in order of appearance.

    Scans for ``{`` and decodes a JSON value from there; a decoded object is skipped over
    whole (its nested objects and any braces inside its strings are part of it).
    """
    found: list[dict[str, Any]] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        position = text.find("{", max(end, position + 1))
    return found


def reply_objects(text: str | None, key: str) -> list[dict[str, Any]] | str:
    """The JSON objects a reply offers as its verdict, first the one it stands for; or why
    there is none. The whole reply when it is one object (strict); else every embedded object
    that has ``key``, in order; else the first embedded object (its missing ``key`` is then the
    caller's error)."""
    if text is None or not isinstance(text, str) or not text.strip():
        return "empty reply"
    try:
        strict = _whole(text)
    except (ValueError, RecursionError):
        strict = None
    if isinstance(strict, dict):
        return [strict]
    objects = _objects(text)
    if not objects:
        return "no JSON object in the reply"
    keyed = [obj for obj in objects if key in obj]
    return keyed or objects[:1]


_SCAN = _DECODER.scan_once


def _whole(text: str) -> Any:
    """``_DECODER.decode(text)``: the scanner alone where it reads the whole text (a reply
    that is one JSON value, nothing around it: most replies), ``decode`` for the others."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        return _DECODER.decode(text)
    return value if end == len(text) else _DECODER.decode(text)


def conflict(key: str, first: Any, later: Any) -> str:
    """The reason a reply with two disagreeing verdicts is unscored."""
    return (f"the reply holds conflicting verdicts: {key} {shown(first)} first, then "
            f"{shown(later)} (a verdict quoted from the judged text?)")
