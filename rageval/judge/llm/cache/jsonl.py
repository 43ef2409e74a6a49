"""The judge cache's JSONL exchange format: entries written one JSON object per line, and read
back with every line validated (the file, the line and the field named on error).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import IO, Any

from rageval.core.errors import InputError
from rageval.judge.llm.cache.entries import (
    Entry,
    canonical_json,
    is_cache_key,
    scrub_credentials,
    storable,
)

__all__ = ["read_entries", "write_entries"]


def write_entries(entries: Iterable[Entry],
                  path_or_file: str | os.PathLike[str] | IO[str]) -> int:
    """Write ``entries`` as one canonical JSON object per line; returns the count."""
    lines = [canonical_json(e.to_json()) + "\n" for e in entries]
    if hasattr(path_or_file, "write"):
        fh: Any = path_or_file
        fh.writelines(lines)
    else:
        with open(path_or_file, "w", encoding="utf-8") as out:  # type: ignore[arg-type]
            out.writelines(lines)
    return len(lines)


def read_entries(path: str | os.PathLike[str]) -> list[Entry]:
    """The entries of a JSONL export, every line validated before any is returned.

    A bad line raises :class:`~rageval.core.errors.InputError` naming the file, the line and the
    field; blank lines are skipped.
    """
    src = str(path)
    entries: list[Entry] = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=src) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason}", path=src) from None
    for lineno, raw in enumerate(lines, start=1):
        if raw.strip():
            entries.append(_parse_line(raw, src, lineno))
    return entries


def _parse_line(raw: str, src: str, lineno: int) -> Entry:
    def bad(msg: str, fld: str | None = None) -> InputError:
        return InputError(msg, path=src, line=lineno, field=fld)

    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise bad("expected a JSON object")
    key = obj.get("key")
    if not is_cache_key(key):
        raise bad("must be a 64-digit lowercase hex SHA-256", "key")
    reply = obj.get("reply")
    if not isinstance(reply, str):
        raise bad("must be a string", "reply")
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("must be a string or null", "model")
    request = obj.get("request", {})
    if not isinstance(request, dict):
        raise bad("must be an object", "request")
    meta = obj.get("meta", {})
    if not isinstance(meta, dict):
        raise bad("must be an object", "meta")
    usage = obj.get("usage", {})
    if not isinstance(usage, dict):
        raise bad("must be an object", "usage")
    for k, v in usage.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad(f"'{k}' must be a non-negative integer", "usage")
    request_id = obj.get("request_id")  # absent from an earlier version's export
    if request_id is not None and not is_cache_key(request_id):
        raise bad("must be a 64-digit lowercase hex SHA-256", "request_id")
    created = obj.get("created", 0.0)
    if isinstance(created, bool) or not isinstance(created, int | float):
        raise bad("must be a number", "created")
    return storable(Entry(
        key=key,
        model=model,
        request=scrub_credentials(request),
        reply_text=reply,
        usage=dict(usage),
        meta=scrub_credentials(meta),
        created=float(created),
        request_id=request_id,
    ))
