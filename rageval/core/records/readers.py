"""Readers of record files: each turns one file into ``(line, decoded object)`` pairs.

JSON Lines (one line at most ``max_line_bytes`` long), JSON (lines, or one array read whole),
CSV and Parquet; :func:`resolve_format` tells which from the file's extension and
:data:`READERS` maps a format to its reader. A malformed file raises
:class:`~rageval.core.errors.InputError` naming the file and the line; the decoded objects are
validated into records by :mod:`rageval.core.records.model`.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from rageval.core.errors import InputError, UsageError
from rageval.core.progress import LoadProgress
from rageval.core.records.lines import (
    BOM,
    DEEP_JSON,
    PathLike,
    binary_lines,
    decode_line,
    file_error,
    parse_json,
    text_lines,
)

# file_error and PathLike were defined here first; they stay importable from here.

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "FORMATS",
    "READERS",
    "PathLike",
    "csv_cells",
    "csv_header",
    "file_error",
    "resolve_format",
]

#: Input formats understood by :func:`~rageval.core.records.iter_records` (the ``format=``
#: values).
FORMATS: tuple[str, ...] = ("jsonl", "json", "csv", "parquet")

_EXTENSIONS: dict[str, str] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}

#: The longest input line read by default (64 MiB). A longer line is refused with an error:
#: reading it would take several times its size in memory. ``max_line_bytes`` (the CLI's
#: ``--max-line-bytes``) raises or lowers the limit.
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024

_JSON_WS = re.compile(r"[ \t\n\r]*")
_PARQUET_SLICE_ROWS = 8192
_CHUNK_BYTES = 1 << 16
# Progress is told every so often, never per item (a JSON array reports every 4096 items, a
# Parquet file every slice, lines every MiB: rageval.core.records.lines).
_ITEMS_BETWEEN_REPORTS = 4096


# --------------------------------------------------------------------------------------------
# The format of a file
# --------------------------------------------------------------------------------------------


def resolve_format(path: PathLike, format: str | None) -> str:
    """The format to read ``path`` as: ``format`` if given, else the one its extension names."""
    if format is not None:
        if format not in FORMATS:
            raise UsageError(f"unknown record format {format!r}; expected one of {list(FORMATS)}")
        return format
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    raise InputError(
        f"cannot tell the record format from the extension {suffix or '(none)'!r}; "
        f"expected one of {sorted(_EXTENSIONS)} (or pass a format explicitly)",
        path=os.fspath(path),
    )


# --------------------------------------------------------------------------------------------
# Readers: each yields (line, decoded object) pairs
# --------------------------------------------------------------------------------------------


def _iter_jsonl(path: PathLike, source: str, limit: int,
                progress: LoadProgress | None = None) -> Iterator[tuple[int, Any]]:
    for number, raw in binary_lines(path, source, limit, progress):
        if raw.isspace() or not raw:
            continue
        yield number, parse_json(decode_line(raw, source, number), source, number)


def _starts_with_bracket(path: PathLike, source: str) -> bool:
    """Whether the first non-whitespace character of the file is ``[``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(BOM))
            head = head[len(BOM) :] if head == BOM else head
            while head.isspace() or not head:
                head = handle.read(_CHUNK_BYTES)
                if not head:
                    return False
    except OSError as error:
        raise file_error(error, source) from None
    return head.lstrip().startswith(b"[")


def _iter_json(path: PathLike, source: str, limit: int,
               progress: LoadProgress | None = None) -> Iterator[tuple[int, Any]]:
    if _starts_with_bracket(path, source):
        yield from _iter_json_array(path, source, progress)  # read whole: it is one value
    else:
        yield from _iter_jsonl(path, source, limit, progress)


def _read_text(path: PathLike, source: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise file_error(error, source) from None
    if data.startswith(BOM):
        data = data[len(BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError(
            f"invalid UTF-8 ({data[error.start : error.end]!r})", path=source, line=line
        ) from None


def _json_position(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _array_error(text: str, position: int, message: str, source: str) -> InputError:
    line, column = _json_position(text, position)
    return InputError(f"malformed JSON: {message} (column {column})", path=source, line=line)


def _skip_ws(text: str, position: int) -> int:
    match = _JSON_WS.match(text, position)
    return match.end() if match else position


def _iter_json_array(path: PathLike, source: str,
                     progress: LoadProgress | None = None) -> Iterator[tuple[int, Any]]:
    """Elements of a JSON array file, each with the line where it starts; ``progress`` is
    told the characters parsed of the text's length."""
    text = _read_text(path, source)
    decoder = json.JSONDecoder()
    position = _skip_ws(text, _skip_ws(text, 0) + 1)  # just after the opening '['
    line, counted, items = 1, 0, 0
    if text.startswith("]", position):
        position += 1
    else:
        while True:
            line += text.count("\n", counted, position)
            counted = position
            try:
                item, position = decoder.raw_decode(text, position)
            except json.JSONDecodeError as error:
                raise _array_error(text, error.pos, error.msg, source) from None
            except RecursionError:
                raise InputError(DEEP_JSON, path=source, line=line) from None
            except ValueError as error:
                raise InputError(f"malformed JSON: {error}", path=source, line=line) from None
            yield line, item
            items += 1
            if progress is not None and not items % _ITEMS_BETWEEN_REPORTS:
                progress(position, len(text))
            position = _skip_ws(text, position)
            if text.startswith(",", position):
                position = _skip_ws(text, position + 1)
            elif text.startswith("]", position):
                position += 1
                break
            else:
                raise _array_error(text, position, "expected ',' or ']'", source)
    if _skip_ws(text, position) != len(text):
        raise _array_error(text, position, "extra data after the array", source)
    if progress is not None:
        progress(len(text), len(text))


def _parse_reference_cell(cell: str, source: str, line: int) -> Any:
    # A JSON list of strings is several references; anything else, "[1] see note" included,
    # is one reference as written.
    if cell.lstrip().startswith("["):
        try:
            value = json.loads(cell)
        except ValueError:
            return cell
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value
    return cell


def csv_header(row: list[str], source: str, required: tuple[str, ...] = ()) -> list[str]:
    """The column names of a CSV header row, checked: each named once, ``required`` present."""
    header = [name.strip() for name in row]
    seen: set[str] = set()
    for index, name in enumerate(header):
        if not name:
            hint = " (a pandas index? write the file with index=False)" if index == 0 else ""
            raise InputError(f"CSV header: column {index + 1} has no name{hint}",
                             path=source, line=1)
        if name in seen:
            raise InputError(f"CSV header: duplicate column {name!r}", path=source, line=1)
        seen.add(name)
    for name in required:
        if name not in seen:
            raise InputError(f"CSV header has no {name!r} column (found columns {header})",
                             path=source, line=1, field=name)
    return header


def csv_cells(path: PathLike, source: str, limit: int, progress: LoadProgress | None = None,
              *, required: tuple[str, ...] = ()) -> tuple[list[str], Iterator[tuple[int, Any]]]:
    """A CSV file's header, and its rows as ``(line, {column: cell})`` with empty cells left
    out and blank rows skipped (``line``: the row's first physical line; a quoted cell may span
    several). The header is read now, the rows as they are iterated."""
    if csv.field_size_limit() < 2**30:
        csv.field_size_limit(2**30)  # cells hold whole JSON arrays of long passages
    reader = csv.reader(text for _, text in text_lines(path, source, limit, progress))

    def malformed(error: csv.Error) -> InputError:
        return InputError(f"malformed CSV: {error}", path=source, line=reader.line_num)

    try:
        first = next(reader, None)
    except csv.Error as error:
        raise malformed(error) from None
    header = [] if first is None else csv_header(first, source, required)

    def rows() -> Iterator[tuple[int, Any]]:
        previous = reader.line_num
        try:
            for row in reader:
                line, previous = previous + 1, reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    raise InputError(f"expected {len(header)} CSV columns (as in the header), "
                                     f"found {len(row)}", path=source, line=line)
                yield line, {name: cell for name, cell in zip(header, row, strict=True)
                             if cell != ""}
        except csv.Error as error:
            raise malformed(error) from None

    return header, rows()


# CSV cells that hold JSON: a record's lists and objects, and a conversation's turns.
_JSON_CELLS = ("contexts", "judgments", "tool_calls", "reference_tool_calls", "turns")


def _iter_csv(path: PathLike, source: str, limit: int,
              progress: LoadProgress | None = None) -> Iterator[tuple[int, Any]]:
    _, rows = csv_cells(path, source, limit, progress, required=("id",))
    for line, cells in rows:
        for name in _JSON_CELLS:
            if name in cells:
                cells[name] = parse_json(cells[name], source, line, name)
        if "reference" in cells:
            cells["reference"] = _parse_reference_cell(cells["reference"], source, line)
        yield line, cells


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if item is not None}
    return value


def _parquet_judgments(value: Any, source: str, line: int) -> Any:
    if isinstance(value, str):
        return parse_json(value, source, line, "judgments")
    if isinstance(value, list) and all(
        isinstance(entry, dict) and entry.keys() == {"key", "value"} for entry in value
    ):
        return {entry["key"]: entry["value"] for entry in value}  # a Parquet map column
    return _drop_nulls(value)


def _parquet_row(row: dict[str, Any], source: str, line: int) -> dict[str, Any]:
    """Map one Parquet row to the JSON form: null means absent, structs become objects."""
    item = {key: value for key, value in row.items() if value is not None}
    contexts = item.get("contexts")
    if isinstance(contexts, str):
        item["contexts"] = parse_json(contexts, source, line, "contexts")
    elif isinstance(contexts, list):
        item["contexts"] = [_drop_nulls(context) for context in contexts]
    if "judgments" in item:
        item["judgments"] = _parquet_judgments(item["judgments"], source, line)
    for name in ("tool_calls", "reference_tool_calls"):
        calls = item.get(name)
        if isinstance(calls, str):
            item[name] = parse_json(calls, source, line, name)
        elif isinstance(calls, list):
            item[name] = [_drop_nulls(call) for call in calls]
    turns = item.get("turns")
    if isinstance(turns, str):  # a conversation's turns as JSON text
        item["turns"] = parse_json(turns, source, line, "turns")
    elif isinstance(turns, list):  # as a list of structs: each turn read as a row is
        item["turns"] = [_parquet_row(turn, source, line) if isinstance(turn, dict) else turn
                         for turn in turns]
    return item


def _iter_parquet(path: PathLike, source: str, limit: int,
                  progress: LoadProgress | None = None) -> Iterator[tuple[int, Any]]:
    """Rows in slices of :data:`_PARQUET_SLICE_ROWS`, each decoded when the stream reaches it
    (polars reads only the row groups a slice spans), so a long file is never held whole."""
    import polars as pl

    try:
        columns = list(pl.read_parquet_schema(path))
        height = int(pl.scan_parquet(path).select(pl.len()).collect().item())
    except Exception as error:  # polars raises several unrelated types for bad files
        raise InputError(f"cannot read Parquet file: {error}", path=source) from None
    if height and "id" not in columns:
        raise InputError(
            f"Parquet file has no 'id' column (found columns {columns})",
            path=source,
            field="id",
        )
    line = 0
    for offset in range(0, height, _PARQUET_SLICE_ROWS):
        try:
            chunk = pl.scan_parquet(path).slice(offset, _PARQUET_SLICE_ROWS).collect()
        except Exception as error:
            raise InputError(f"cannot read Parquet file: {error}", path=source,
                             line=offset + 1) from None
        for row in chunk.to_dicts():
            line += 1
            yield line, _parquet_row(row, source, line)
        if progress is not None:
            progress(line, height)


#: The reader of each format: ``(path, source, max_line_bytes, progress=None)`` ->
#: ``(line, object)`` pairs (``progress``: a :data:`~rageval.core.progress.LoadProgress`).
READERS = {
    "jsonl": _iter_jsonl,
    "json": _iter_json,
    "csv": _iter_csv,
    "parquet": _iter_parquet,
}

