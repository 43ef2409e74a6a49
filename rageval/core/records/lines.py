"""Lines of input files: opening errors, physical lines under a length limit, UTF-8 decoding
and JSON values, each failure an :class:`~rageval.core.errors.InputError` naming the file and
the line. Shared by the records readers (:mod:`rageval.core.records.readers`) and the readers
of other tools' formats (:mod:`rageval.inputs`), so that their errors read alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from rageval.core.errors import InputError
from rageval.core.progress import LoadProgress

__all__ = ["BOM", "DEEP_JSON", "binary_lines", "decode_line", "file_error", "parse_json",
           "text_lines"]

PathLike = str | os.PathLike[str]

BOM = b"\xef\xbb\xbf"
# Progress is told every so often, never per line, so that it costs nothing measurable.
_LINES_BETWEEN_LOOKS = 256
_BYTES_BETWEEN_REPORTS = 1 << 20
#: The error of JSON nested deeper than Python's parser goes (about 1,000 levels).
DEEP_JSON = ("JSON nested too deeply to read (lists and objects within each other, about "
             "1,000 levels or more)")


def file_error(error: OSError, source: str) -> InputError:
    """The :class:`InputError` for a file that cannot be opened or read."""
    if isinstance(error, FileNotFoundError):
        return InputError("file not found", path=source)
    if isinstance(error, IsADirectoryError):
        return InputError("is a directory, expected a file", path=source)
    return InputError(f"cannot read file: {error.strerror or error}", path=source)


def decode_line(raw: bytes, source: str, line: int) -> str:
    """A line's bytes as UTF-8 text; an :class:`InputError` naming the byte otherwise."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"invalid UTF-8 (byte {error.start + 1} of the line: {raw[error.start : error.end]!r})",
            path=source,
            line=line,
        ) from None


def parse_json(text: str, source: str, line: int, field: str | None = None) -> Any:
    """``json.loads`` with every failure turned into an :class:`InputError`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        column = error.colno if error.lineno == 1 else f"{error.colno} of line {error.lineno}"
        raise InputError(
            f"malformed JSON: {error.msg} (column {column})", path=source, line=line, field=field
        ) from None
    except RecursionError:
        raise InputError(DEEP_JSON, path=source, line=line, field=field) from None
    except ValueError as error:
        raise InputError(f"malformed JSON: {error}", path=source, line=line, field=field) from None


def binary_lines(path: PathLike, source: str, limit: int,
                  progress: LoadProgress | None = None, *,
                  buffer: int = -1) -> Iterator[tuple[int, bytes]]:
    """Physical lines of a file as bytes (1-based numbers), without a leading BOM; a line
    longer than ``limit`` bytes (its newline not counted) is an error, found before more than
    ``limit`` bytes of it are read. ``progress`` is told the bytes read of the file's size.
    ``buffer``: the bytes read at a time (-1: the default), more for a file of long lines,
    which a small buffer reads in many pieces joined."""
    try:
        handle = open(path, "rb", buffering=buffer)  # noqa: SIM115 - closed by the with below
    except OSError as error:
        raise file_error(error, source) from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        reported = 0
        for number, raw in enumerate(iter(lambda: handle.readline(limit + 1), b""), 1):
            if progress is not None and not number % _LINES_BETWEEN_LOOKS:
                position = handle.tell()
                if position - reported >= _BYTES_BETWEEN_REPORTS:
                    reported = position
                    progress(position, max(size, position))
            if number == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            if len(raw) > limit and not raw.endswith(b"\n"):
                raise InputError(
                    f"line longer than {limit:,} bytes, the limit for one record (raise it "
                    "with --max-line-bytes, or max_line_bytes= in Python)",
                    path=source, line=number)
            yield number, raw
        if progress is not None:
            end = handle.tell()
            progress(end, max(size, end))


def text_lines(path: PathLike, source: str, limit: int,
               progress: LoadProgress | None = None) -> Iterator[tuple[int, str]]:
    """``(number, text)`` of every physical line, newline kept (see :func:`binary_lines`)."""
    for number, raw in binary_lines(path, source, limit, progress):
        yield number, decode_line(raw, source, number)
