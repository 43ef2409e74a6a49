"""Opening input files: their format, their raw rows, JSON cells.

JSON Lines, JSON, CSV and Parquet records files are read by rageval's own readers
(:data:`~rageval.core.records.readers.READERS`), and text files line by line with
:func:`~rageval.core.records.lines.text_lines`, so their errors read as the native format's do;
this module adds the Arrow format and Python list literals in cells.
"""

from __future__ import annotations

import ast
import contextlib
import os
from collections.abc import Iterator
from typing import Any

from rageval.core.errors import LARGEST_COUNT, InputError, UsageError, check_int
from rageval.core.records.lines import file_error, parse_json
from rageval.core.records.readers import DEFAULT_MAX_LINE_BYTES, READERS, resolve_format

__all__ = [
    "INPUT_FORMATS",
    "check_file",
    "input_format",
    "iter_raw",
    "json_cell",
    "line_limit",
]

#: Formats a records file may have (:attr:`~rageval.inputs.InputSpec.format`).
INPUT_FORMATS: tuple[str, ...] = ("jsonl", "json", "csv", "parquet", "arrow")

def line_limit(max_line_bytes: int | None) -> int:
    """The longest line to read, checked as the native readers check it."""
    limit = DEFAULT_MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    check_int("max_line_bytes (--max-line-bytes)", limit, 1, high=LARGEST_COUNT)
    return limit


def check_file(path: str, *, directory: bool = False) -> None:
    """Raise the native :class:`InputError` for a missing or unreadable file (a directory is
    accepted when ``directory``)."""
    try:
        if os.path.isdir(path):
            if directory:
                return
            raise IsADirectoryError(path)
        os.stat(path)
    except OSError as error:
        raise file_error(error, path) from None


def input_format(path: str, format: str | None) -> str:
    """The format to read ``path`` as: ``format`` when given, else from the extension; a
    directory (as ``datasets.save_to_disk`` writes) and a ``.arrow`` file are Arrow."""
    if format is not None:
        if format not in INPUT_FORMATS:
            raise UsageError(f"unknown input format {format!r}; expected one of "
                             f"{list(INPUT_FORMATS)}")
        return format
    check_file(path, directory=True)
    if os.path.isdir(path) or path.lower().endswith(".arrow"):
        return "arrow"
    return resolve_format(path, None)


def iter_raw(path: str, fmt: str, limit: int) -> Iterator[tuple[int, Any]]:
    """``(line, decoded object)`` pairs of a JSONL, JSON, CSV or Parquet file, unvalidated,
    read by rageval's own readers (Parquet rows are numbered as lines)."""
    check_file(path)
    return READERS[fmt](path, path, limit)


def json_cell(text: str, source: str, line: int, field: str | None, *,
              literals: bool = False) -> Any:
    """A cell holding JSON, decoded; an :class:`InputError` naming the field when it is not.

    ``literals`` also reads a Python list or dict literal (``['a', 'b']``), which is what
    pandas' ``to_csv`` writes for a list column (ragas' own CSV exports hold them).
    """
    try:
        return parse_json(text, source, line, field)
    except InputError:
        if literals and text.lstrip()[:1] in ("[", "{"):
            with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
                return ast.literal_eval(text)  # literals only: no code is run
        raise
