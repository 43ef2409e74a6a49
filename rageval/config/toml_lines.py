"""Where a key of a TOML document is written, so that errors found after parsing name the line.

:mod:`tomllib` gives the line of a syntax error but keeps no positions in what it returns. The
evaluation file is small and flat (a few tables of ``key = value`` lines, inline tables at
most), so a scan of the lines finds every key that matters: the table headers it passes
(``[judge]``), the keys it meets (``model = ...``, ``"p(rel=2)@5" = 0.3``) and, for an inline
table (``fail_under = {"ndcg@10" = 0.45}``), the keys inside it on the same line.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = r'(?:"(?:[^"\\]|\\.)*"|\'[^\']*\'|[A-Za-z0-9_-]+)'
_DOTTED = re.compile(rf"^\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*=")
_INLINE_KEY = re.compile(rf"[{{,]\s*({_KEY})\s*=")


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Every key path found, mapped to the 1-based line where it is first written."""
    found: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            table = _split_dotted(header.group(1))
            found.setdefault(table, number)
            continue
        key = _DOTTED.match(line)
        if not key:
            continue
        path = table + _split_dotted(key.group(1))
        found.setdefault(path, number)
        rest = line[key.end():]
        if rest.lstrip().startswith("{"):
            for inner in _INLINE_KEY.finditer(rest):
                found.setdefault((*path, _unquote(inner.group(1))), number)
    return found


def line_of(lines: dict[tuple[str, ...], int], path: tuple[str, ...]) -> int | None:
    """The line of ``path``, or of the nearest enclosing key that was found."""
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = re.findall(_KEY, text)
    return tuple(_unquote(part) for part in parts)


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        inner = key[1:-1]
        # Basic strings may hold escapes; metric names in keys need at most \" and \\.
        return inner.replace('\\"', '"').replace("\\\\", "\\") if key[0] == '"' else inner
    return key
