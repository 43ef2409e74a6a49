"""Lone surrogates: the code points U+D800 to U+DFFF, which JSON's ``\\ud800`` escapes let into
a Python string but which no UTF-8 text can hold (encoding one raises "surrogates not
allowed").

The rule, the same at every reader and writer: an id holding one is not valid Unicode and is
refused (:func:`unicode_problem` says why, the reader adds the file, line and field); in text
rageval writes, each is replaced with U+FFFD, the replacement character, and the record's
details say where (:func:`repaired`, the paths of the fields it changed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["LONE_SURROGATES", "REPLACEMENT", "escaped_lone_surrogates", "has_lone_surrogates",
           "repaired", "repaired_outputs", "unicode_problem", "utf8_record_lines",
           "without_lone_surrogates"]

#: What a lone surrogate becomes in text rageval writes.
REPLACEMENT = "\ufffd"
#: Where a record says which of its fields held lone surrogates, replaced: a key of its
#: ``extra`` (the fields of its input: ``answer``, ``contexts[0].text``) and of its details
#: in ``records.jsonl`` (those, then the written ones: ``details.judge:faithfulness.reasoning``).
LONE_SURROGATES = "lone_surrogates"

_LONE = re.compile("[\ud800-\udfff]")


def has_lone_surrogates(text: str) -> bool:
    """Whether ``text`` holds a code point that UTF-8 cannot encode."""
    return not text.isascii() and _LONE.search(text) is not None


def without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced with U+FFFD."""
    return text if text.isascii() else _LONE.sub(REPLACEMENT, text)


def escaped_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its JSON escape (``\\ud800``): JSON text
    then means what it meant and can be stored as UTF-8 (the judge cache keeps a reply this
    way, so that a replay reads the reply the server sent)."""
    if text.isascii():
        return text
    return _LONE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (its first lone surrogate and where), or None."""
    found = None if text.isascii() else _LONE.search(text)
    if found is None:
        return None
    return (f"not valid Unicode: a lone surrogate (U+{ord(found.group()):04X}, character "
            f"{found.start() + 1}), which no UTF-8 text can hold")


def repaired(value: Any, path: str, changed: list[str]) -> Any:
    """``value`` (JSON-like: strings, numbers, lists, tuples, dicts) with every lone surrogate
    in its strings and keys replaced with U+FFFD; the path of each string changed (``path``,
    then ``.key`` and ``[index]`` below it) is appended to ``changed``. Values without one are
    returned as they are."""
    if isinstance(value, str):
        if not has_lone_surrogates(value):
            return value
        changed.append(path)
        return without_lone_surrogates(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = without_lone_surrogates(key) if isinstance(key, str) else key
            if name != key:
                changed.append(f"{path}.{name}")
            out[name] = repaired(item, f"{path}.{name}", changed)
        return out
    if isinstance(value, list | tuple):
        items = [repaired(item, f"{path}[{i}]", changed) for i, item in enumerate(value)]
        return type(value)(items) if isinstance(value, tuple) else items
    return value


def utf8_record_lines(rows: Sequence[dict[str, Any]]) -> bytes:
    """Lines of ``records.jsonl`` (``{"id", "scores", "details", "errors"}`` each) in UTF-8.
    Where some text holds a lone surrogate, each such row's errors and details are
    :func:`repaired` and its details list the paths changed under :data:`LONE_SURROGATES`."""
    try:
        return "".join(_json_line(row) for row in rows).encode("utf-8")
    except UnicodeEncodeError:
        lines = []
        for row in rows:
            errors, details = repaired_outputs(row.get("errors"), row.get("details"))
            lines.append(_json_line({**row, "errors": errors, "details": details}))
        return "".join(lines).encode("utf-8")


def repaired_outputs(errors: Any, details: Any) -> tuple[Any, Any]:
    """A record's written errors and details (None: none) :func:`repaired`, its details then
    listing the paths changed under :data:`LONE_SURROGATES` (after the fields of its input
    repaired when it was read, listed there already)."""
    changed: list[str] = []
    errors = None if errors is None else repaired(errors, "errors", changed)
    details = None if details is None else repaired(details, "details", changed)
    if changed:
        earlier = list((details or {}).get(LONE_SURROGATES, ()))
        details = {**(details or {}), LONE_SURROGATES: earlier + changed}
    return errors, details


def _json_line(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"
