"""Loading and validating evaluation records.

One *record* is one RAG interaction: a query, the contexts the retriever returned, the
generated answer, reference answers and (optionally) graded relevance judgments.

Record format
=============

JSON Lines (``.jsonl``, the primary format) holds one JSON object per line::

    {"id": "q1", "query": "What are the company's main revenue sources?",
     "contexts": [{"id": "d3", "text": "...", "score": 12.7}, {"id": "d9", "text": "..."}],
     "answer": "...", "reference": "...",
     "judgments": {"d3": 2, "d7": 1}}

Fields:

``id`` (required)
    A non-empty string; an integer is accepted and converted with ``str()``. Record ids are
    unique within a file.
``query``, ``answer``
    A string, or absent / ``null``.
``contexts``
    The retrieved contexts, in rank order: a list whose items are either plain strings (their
    ids are then their 1-based positions as strings: ``"1"``, ``"2"``, ...) or objects with a
    ``text`` (string, may be empty), an ``id`` (non-empty string, or an integer converted with
    ``str()``) and an optional ``score`` (a finite number). Any other key of a context object
    is kept in :attr:`Context.metadata`. Context ids are unique within a record. Absent or
    ``null`` means no contexts.
``reference``
    A reference answer (string) or a non-empty list of them; stored as
    :attr:`Record.references`.
``judgments``
    Graded relevance judgments (TREC qrels style): an object mapping a doc id to an integer
    grade (negative grades are allowed, as in TREC). An empty object ``{}`` means "judged,
    nothing relevant"; absent or ``null`` means "no judgments" (``None``).

Every other top-level key is kept, untouched, in :attr:`Record.extra`.

Blank lines are skipped. Other formats carry the same fields:

* ``.json``: JSON Lines, or a single JSON array of record objects.
* ``.csv``: a header row naming the columns ``id`` (required), ``query``, ``answer``,
  ``reference``, ``contexts`` and ``judgments``; other columns go to ``extra`` as strings.
  ``contexts`` cells hold a JSON array, ``judgments`` cells a JSON object, and a
  ``reference`` cell is a plain string or, when it starts with ``[``, a JSON array of
  strings. An empty cell means the field is absent. Line numbers are physical lines of the
  file (the header is line 1).
* ``.parquet``: one row per record; list and struct columns map to the same fields (a
  ``judgments`` struct or map column, ``contexts`` as a list of strings or of structs). A
  null value means the field is absent. Errors report the 1-based row number as the line.

Every problem with the input raises :class:`~rageval.core.errors.InputError` naming the file, the
line and the field (a dotted path such as ``contexts[2].id`` or ``judgments.d3``; list
indices count from 0), before anything is scored.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gc
import json
import math
import numbers
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from rageval.core.errors import InputError, UsageError

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "FORMATS",
    "Context",
    "Record",
    "apply_judgments",
    "iter_records",
    "load_records",
    "records_from_dicts",
]

#: Input formats understood by :func:`iter_records` (the ``format=`` values).
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

_RECORD_KEYS = frozenset({"id", "query", "contexts", "answer", "reference", "judgments"})
_CONTEXT_KEYS = frozenset({"id", "text", "score"})

_BOM = b"\xef\xbb\xbf"
_JSON_WS = re.compile(r"[ \t\n\r]*")
_PARQUET_SLICE_ROWS = 8192
_CHUNK_BYTES = 1 << 16
_REPR_LIMIT = 40

_EMPTY: Mapping[str, Any] = MappingProxyType({})

PathLike = str | os.PathLike[str]


def _empty_mapping() -> Mapping[str, Any]:
    return _EMPTY


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of ``value`` (``value`` itself when already read-only)."""
    if type(value) is MappingProxyType:
        return value
    return MappingProxyType(dict(value)) if value else _EMPTY


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    """One retrieved context (passage), in rank order within its record."""

    id: str
    text: str
    score: float | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        metadata = _frozen_mapping(self.metadata)
        if metadata is not self.metadata:
            object.__setattr__(self, "metadata", metadata)
        if metadata and not _CONTEXT_KEYS.isdisjoint(metadata):
            clash = sorted(_CONTEXT_KEYS.intersection(metadata))
            raise UsageError(f"context metadata must not use the reserved keys {clash}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this context (metadata keys at the top level)."""
        out: dict[str, Any] = {"id": self.id, "text": self.text}
        if self.score is not None:
            out["score"] = self.score
        if self.metadata:
            out.update(self.metadata)
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One RAG interaction to evaluate. See the module docstring for the JSON form."""

    id: str
    query: str | None = None
    contexts: tuple[Context, ...] = ()
    answer: str | None = None
    references: tuple[str, ...] = ()
    judgments: Mapping[str, int] | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        if type(self.contexts) is not tuple:
            object.__setattr__(self, "contexts", tuple(self.contexts))
        if type(self.references) is not tuple:
            object.__setattr__(self, "references", tuple(self.references))
        if self.judgments is not None and type(self.judgments) is not MappingProxyType:
            object.__setattr__(self, "judgments", MappingProxyType(dict(self.judgments)))
        extra = _frozen_mapping(self.extra)
        if extra is not self.extra:
            object.__setattr__(self, "extra", extra)
        if extra and not _RECORD_KEYS.isdisjoint(extra):
            clash = sorted(_RECORD_KEYS.intersection(extra))
            raise UsageError(f"record extra must not use the reserved keys {clash}")

    @property
    def reference(self) -> str | None:
        """The first reference answer, or ``None`` when there is none."""
        return self.references[0] if self.references else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this record; loading it again gives an equal record."""
        out: dict[str, Any] = {"id": self.id}
        if self.query is not None:
            out["query"] = self.query
        if self.contexts:
            out["contexts"] = [context.to_dict() for context in self.contexts]
        if self.answer is not None:
            out["answer"] = self.answer
        if len(self.references) == 1:
            out["reference"] = self.references[0]
        elif self.references:
            out["reference"] = list(self.references)
        if self.judgments is not None:
            out["judgments"] = dict(self.judgments)
        if self.extra:
            out.update(self.extra)
        return out


# --------------------------------------------------------------------------------------------
# Validation of one record (format independent)
# --------------------------------------------------------------------------------------------


class _FieldError(Exception):
    """A validation failure inside one record; the caller adds the file and the line."""

    def __init__(self, message: str, field: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


_TYPE_NAMES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
    type(None): "null",
}


def _describe(value: Any) -> str:
    """Type name and short repr of a found value, for error messages."""
    if value is None:
        return "null"
    name = _TYPE_NAMES.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return f"{name} {text}"


def _expected(what: str, value: Any, field: str | None) -> _FieldError:
    return _FieldError(f"expected {what}, found {_describe(value)}", field)


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _identifier(value: Any, field: str) -> str:
    """A record or context id: a non-empty string, or an integer converted with ``str()``."""
    if type(value) is str or isinstance(value, str):
        if value:
            return value
    elif _is_integer(value):
        return str(int(value))
    raise _expected("a non-empty string or an integer", value, field)


def _optional_str(value: Any, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _expected("a string", value, field)


def _score(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number):
            return number
    raise _expected("a finite number", value, field)


# Grades are stored as int64 and used as exponents (2^g - 1 gains): keep them in a sane range.
MAX_GRADE = 1000


def _grade(value: Any, field: str) -> int:
    if type(value) is int:
        grade = value
    elif _is_integer(value) or (isinstance(value, float) and value.is_integer()):
        grade = int(value)
    else:
        raise _expected("an integer grade", value, field)
    if abs(grade) > MAX_GRADE:
        raise _FieldError(f"grade {grade} is outside -{MAX_GRADE}..{MAX_GRADE}", field)
    return grade


def _judgments(value: Any, field: str = "judgments") -> Mapping[str, int] | None:
    if value is None:
        return None
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _expected("an object mapping doc ids to integer grades", value, field)
    grades: dict[str, int] = {}
    for doc, grade in value.items():
        if not isinstance(doc, str) or not doc:
            raise _expected("non-empty string doc ids", doc, field)
        grades[doc] = _grade(grade, f"{field}.{doc}")
    return MappingProxyType(grades)


def _references(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and value:
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise _expected("a string", item, f"reference[{index}]")
        return tuple(value)
    raise _expected("a string or a non-empty list of strings", value, "reference")


def _context_object(item: Mapping[str, Any], index: int) -> Context:
    try:
        context_id = item["id"]
        text = item["text"]
    except KeyError as missing:
        name = missing.args[0]
        raise _FieldError(f"missing required field {name!r}", f"contexts[{index}].{name}") from None
    if type(context_id) is not str or not context_id:
        context_id = _identifier(context_id, f"contexts[{index}].id")
    if type(text) is not str:
        raise _expected("a string", text, f"contexts[{index}].text")
    score = item.get("score")
    if score is not None and not (type(score) is float and math.isfinite(score)):
        score = _score(score, f"contexts[{index}].score")
    if len(item) == 2 + ("score" in item):
        return Context(context_id, text, score)
    metadata: dict[str, Any] = {}
    for key, value in item.items():
        if key not in _CONTEXT_KEYS:
            if not isinstance(key, str):
                raise _expected("string keys", key, f"contexts[{index}]")
            metadata[key] = value
    return Context(context_id, text, score, MappingProxyType(metadata))


def _contexts(value: Any) -> tuple[Context, ...]:
    if value is None:
        return ()
    if type(value) is not list and not isinstance(value, list | tuple):
        raise _expected("a list of strings or objects", value, "contexts")
    contexts: list[Context] = []
    positions: dict[str, int] = {}
    for index, item in enumerate(value):
        if type(item) is dict or (not isinstance(item, str) and isinstance(item, Mapping)):
            context = _context_object(item, index)
        elif isinstance(item, str):
            context = Context(str(index + 1), item)
        else:
            raise _expected("a string or an object", item, f"contexts[{index}]")
        first = positions.setdefault(context.id, index)
        if first != index:
            raise _FieldError(
                f"duplicate context id {context.id!r}: contexts[{first}] and contexts[{index}]",
                f"contexts[{index}].id" if isinstance(item, Mapping) else f"contexts[{index}]",
            )
        contexts.append(context)
    return tuple(contexts)


def _extra(item: Mapping[str, Any]) -> Mapping[str, Any]:
    if len(item) <= len(_RECORD_KEYS) and _RECORD_KEYS.issuperset(item):
        return _EMPTY
    extra: dict[str, Any] = {}
    for key, value in item.items():
        if key not in _RECORD_KEYS:
            if not isinstance(key, str):
                raise _expected("string keys", key, None)
            extra[key] = value
    return MappingProxyType(extra)


def _record(item: Any) -> Record:
    """Validate one decoded record object; raises :class:`_FieldError`."""
    if type(item) is not dict and not isinstance(item, Mapping):
        raise _expected("a record object", item, None)
    if "id" not in item:
        raise _FieldError("missing required field 'id'", "id")
    return Record(
        id=_identifier(item["id"], "id"),
        query=_optional_str(item.get("query"), "query"),
        contexts=_contexts(item.get("contexts")),
        answer=_optional_str(item.get("answer"), "answer"),
        references=_references(item.get("reference")),
        judgments=_judgments(item.get("judgments")),
        extra=_extra(item),
    )


def _validate(raw: Iterable[tuple[int, Any]], source: str, unit: str) -> Iterator[Record]:
    """Validate ``(line, object)`` pairs into records; checks duplicate ids and emptiness."""
    seen: dict[str, int] = {}
    for line, item in raw:
        try:
            record = _record(item)
        except _FieldError as error:
            message = error.message if unit != "row" else f"{error.message} (row {line})"
            raise InputError(message, path=source, line=line, field=error.field) from None
        first = seen.setdefault(record.id, line)
        if first != line:
            raise InputError(
                f"duplicate record id {record.id!r} (first used at {unit} {first})",
                path=source,
                line=line,
                field="id",
            )
        yield record
    if not seen:
        raise InputError("contains no records", path=source)


# --------------------------------------------------------------------------------------------
# Readers: each yields (line, decoded object) pairs
# --------------------------------------------------------------------------------------------


def _decode(raw: bytes, source: str, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"invalid UTF-8 (byte {error.start + 1} of the line: {raw[error.start : error.end]!r})",
            path=source,
            line=line,
        ) from None


def _loads(text: str, source: str, line: int, field: str | None = None) -> Any:
    """``json.loads`` with every failure turned into an :class:`InputError`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        column = error.colno if error.lineno == 1 else f"{error.colno} of line {error.lineno}"
        raise InputError(
            f"malformed JSON: {error.msg} (column {column})", path=source, line=line, field=field
        ) from None
    except (ValueError, RecursionError) as error:
        raise InputError(f"malformed JSON: {error}", path=source, line=line, field=field) from None


def _binary_lines(path: PathLike, source: str, limit: int) -> Iterator[tuple[int, bytes]]:
    """Physical lines of a file as bytes (1-based numbers), without a leading BOM; a line
    longer than ``limit`` bytes (its newline not counted) is an error, found before more than
    ``limit`` bytes of it are read."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as error:
        raise _os_error(error, source) from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(limit + 1), b""), 1):
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            if len(raw) > limit and not raw.endswith(b"\n"):
                raise InputError(
                    f"line longer than {limit:,} bytes, the limit for one record (raise it "
                    "with --max-line-bytes, or max_line_bytes= in Python)",
                    path=source, line=number)
            yield number, raw


def _iter_jsonl(path: PathLike, source: str, limit: int) -> Iterator[tuple[int, Any]]:
    for number, raw in _binary_lines(path, source, limit):
        if raw.isspace() or not raw:
            continue
        yield number, _loads(_decode(raw, source, number), source, number)


def _starts_with_bracket(path: PathLike, source: str) -> bool:
    """Whether the first non-whitespace character of the file is ``[``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(_BOM))
            head = head[len(_BOM) :] if head == _BOM else head
            while head.isspace() or not head:
                head = handle.read(_CHUNK_BYTES)
                if not head:
                    return False
    except OSError as error:
        raise _os_error(error, source) from None
    return head.lstrip().startswith(b"[")


def _iter_json(path: PathLike, source: str, limit: int) -> Iterator[tuple[int, Any]]:
    if _starts_with_bracket(path, source):
        yield from _iter_json_array(path, source)  # read whole: a JSON array is one value
    else:
        yield from _iter_jsonl(path, source, limit)


def _read_text(path: PathLike, source: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise _os_error(error, source) from None
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
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


def _iter_json_array(path: PathLike, source: str) -> Iterator[tuple[int, Any]]:
    """Elements of a JSON array file, each with the line where it starts."""
    text = _read_text(path, source)
    decoder = json.JSONDecoder()
    position = _skip_ws(text, _skip_ws(text, 0) + 1)  # just after the opening '['
    line, counted = 1, 0
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
            except (ValueError, RecursionError) as error:
                raise InputError(f"malformed JSON: {error}", path=source, line=line) from None
            yield line, item
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


def _csv_header(row: list[str] | None, source: str) -> list[str] | None:
    if row is None:
        return None
    header = [name.strip() for name in row]
    seen: set[str] = set()
    for index, name in enumerate(header):
        if not name:
            raise InputError(f"CSV header: column {index + 1} has no name", path=source, line=1)
        if name in seen:
            raise InputError(f"CSV header: duplicate column {name!r}", path=source, line=1)
        seen.add(name)
    if "id" not in seen:
        raise InputError(
            f"CSV header has no 'id' column (found columns {header})",
            path=source,
            line=1,
            field="id",
        )
    return header


def _csv_row(header: list[str], row: list[str], source: str, line: int) -> dict[str, Any]:
    if len(row) != len(header):
        raise InputError(
            f"expected {len(header)} CSV columns (as in the header), found {len(row)}",
            path=source,
            line=line,
        )
    item: dict[str, Any] = {}
    for name, cell in zip(header, row, strict=True):
        if cell == "":
            continue
        if name in ("contexts", "judgments"):
            item[name] = _loads(cell, source, line, name)
        elif name == "reference":
            item[name] = _parse_reference_cell(cell, source, line)
        else:
            item[name] = cell
    return item


def _decoded_lines(path: PathLike, source: str, limit: int) -> Iterator[str]:
    for number, raw in _binary_lines(path, source, limit):
        yield _decode(raw, source, number)


def _iter_csv(path: PathLike, source: str, limit: int) -> Iterator[tuple[int, Any]]:
    if csv.field_size_limit() < 2**30:
        csv.field_size_limit(2**30)  # cells hold whole JSON arrays of long passages
    reader = csv.reader(_decoded_lines(path, source, limit))
    try:
        header = _csv_header(next(reader, None), source)
        if header is None:
            return
        previous = reader.line_num
        for row in reader:
            line, previous = previous + 1, reader.line_num
            if row:
                yield line, _csv_row(header, row, source, line)
    except csv.Error as error:
        raise InputError(f"malformed CSV: {error}", path=source, line=reader.line_num) from None


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if item is not None}
    return value


def _parquet_judgments(value: Any, source: str, line: int) -> Any:
    if isinstance(value, str):
        return _loads(value, source, line, "judgments")
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
        item["contexts"] = _loads(contexts, source, line, "contexts")
    elif isinstance(contexts, list):
        item["contexts"] = [_drop_nulls(context) for context in contexts]
    if "judgments" in item:
        item["judgments"] = _parquet_judgments(item["judgments"], source, line)
    return item


def _iter_parquet(path: PathLike, source: str, limit: int) -> Iterator[tuple[int, Any]]:
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except Exception as error:  # polars raises several unrelated types for bad files
        raise InputError(f"cannot read Parquet file: {error}", path=source) from None
    if frame.height and "id" not in frame.columns:
        raise InputError(
            f"Parquet file has no 'id' column (found columns {frame.columns})",
            path=source,
            field="id",
        )
    line = 0
    for chunk in frame.iter_slices(n_rows=_PARQUET_SLICE_ROWS):
        for row in chunk.to_dicts():
            line += 1
            yield line, _parquet_row(row, source, line)


_READERS = {
    "jsonl": _iter_jsonl,
    "json": _iter_json,
    "csv": _iter_csv,
    "parquet": _iter_parquet,
}


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _os_error(error: OSError, source: str) -> InputError:
    if isinstance(error, FileNotFoundError):
        return InputError("file not found", path=source)
    if isinstance(error, IsADirectoryError):
        return InputError("is a directory, expected a file", path=source)
    return InputError(f"cannot read file: {error.strerror or error}", path=source)


def _resolve_format(path: PathLike, format: str | None) -> str:
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


def iter_records(path: PathLike, *, format: str | None = None,
                 max_line_bytes: int | None = None) -> Iterator[Record]:
    """Stream the records of a file, validating each one as it is read.

    The format comes from the extension (``.jsonl``, ``.json``, ``.csv``, ``.parquet``)
    unless ``format`` (one of :data:`FORMATS`) is given. Duplicate record ids are detected
    as the stream reaches them; an unknown format or a missing file is reported at once, any
    other problem when the stream reaches it. Raises :class:`InputError`.

    A line longer than ``max_line_bytes`` (default :data:`DEFAULT_MAX_LINE_BYTES`) in a JSONL,
    CSV or line-delimited JSON file is an error; a JSON array file is read whole.
    """
    fmt = _resolve_format(path, format)
    limit = DEFAULT_MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"max_line_bytes must be a positive integer, got {limit!r}")
    source = os.fspath(path)
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(source)
        os.stat(path)  # a missing or unreadable file is reported before iteration starts
    except OSError as error:
        raise _os_error(error, source) from None
    unit = "row" if fmt == "parquet" else "line"
    return _validate(_READERS[fmt](path, source, limit), source, unit)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects.

    Loading allocates millions of small containers, none of them in reference cycles; the
    collector's repeated passes over the growing heap would roughly double the load time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_records(path: PathLike, *, format: str | None = None,
                 max_line_bytes: int | None = None) -> list[Record]:
    """Load and validate every record of a file (see :func:`iter_records`)."""
    records = iter_records(path, format=format, max_line_bytes=max_line_bytes)
    with _gc_paused():
        return list(records)


def records_from_dicts(
    items: Iterable[Mapping[str, Any]], *, source: str = "<memory>"
) -> list[Record]:
    """Validate records given as JSON-form mappings; errors name ``source`` and the item
    number (1-based) as the line."""
    with _gc_paused():
        return list(_validate(enumerate(items, 1), source, "item"))


def apply_judgments(
    records: Iterable[Record],
    judgments: Mapping[str, Mapping[str, int]],
    *,
    source: str,
    records_source: str | None = None,
) -> list[Record]:
    """Return the records with judgments filled in from a qrels mapping (record id -> doc id
    -> grade) read from ``source``.

    Records without an entry keep their judgments. A record that has inline judgments *and*
    an entry in ``judgments`` is an :class:`InputError`: one of the two sources would be lost.
    ``records_source`` (the records file) is named in that error when given.
    """
    out: list[Record] = []
    inline_source = records_source if records_source is not None else "the records"
    for record in records:
        qrels = judgments.get(record.id)
        if qrels is None:
            out.append(record)
            continue
        if record.judgments is not None:
            raise InputError(
                f"record {record.id!r} has inline judgments in {inline_source} and judgments "
                f"in {source}; give judgments in one place only",
                path=source,
                field="judgments",
            )
        out.append(_with_judgments(record, qrels, source))
    return out


def _with_judgments(record: Record, qrels: Mapping[str, int], source: str) -> Record:
    try:
        grades = _judgments(qrels, f"judgments.{record.id}")
    except _FieldError as error:
        raise InputError(error.message, path=source, field=error.field) from None
    return dataclasses.replace(record, judgments=grades)
