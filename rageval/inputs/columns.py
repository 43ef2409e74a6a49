"""Giving a table's columns their rageval meaning, then validating rows as native records.

A :class:`ColumnPlan` says which source column holds each rageval field: the user's field map
first, then (for ragas tables) the first of the default column names present. Every other
column is kept under its own name (in :attr:`Record.extra`, or as the native field of that
name). Rows are converted to rageval's JSON form and validated by
:func:`~rageval.core.records.validation.validate_records`, so errors read as the native format's do;
a field path in an error is then renamed back to the column the user wrote (``question``, not
``query``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rageval.core.errors import InputError, close_matches
from rageval.core.records.model import Record
from rageval.core.records.validation import validate_records
from rageval.inputs.files import json_cell
from rageval.inputs.ragas_turns import is_multi_turn, multi_turn
from rageval.inputs.tables import Table

__all__ = ["RAGAS_COLUMNS", "ColumnPlan", "plan_columns", "records_from_table", "renamed_errors"]

#: ragas' column names for each rageval field, in order of preference: ragas >= 0.2 names,
#: then the older ones (and rageval's own).
RAGAS_COLUMNS: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    "query": ("user_input", "question", "query"),
    "contexts": ("retrieved_contexts", "contexts"),
    "answer": ("response", "answer"),
    "reference": ("reference", "ground_truths", "ground_truth"),
    "judgments": ("judgments",),
}

# Column names that are rageval fields: a column left under its own name becomes that field.
_FIELD_NAMES = frozenset({"id", "query", "contexts", "answer", "reference", "judgments",
                          "claims", "nuggets"})
_CORE = ("query", "contexts", "answer")  # a ragas table must have one of these
_HEAD = re.compile(r"[^.\[]+")


@dataclass(frozen=True)
class ColumnPlan:
    """``fields``: rageval field -> the source column holding it; ``number_ids``: no id
    column, so a record's id is its 1-based row number."""

    fields: Mapping[str, str]
    number_ids: bool = False

    def renames(self) -> dict[str, str]:
        """rageval field -> source column, where the two names differ."""
        return {field: column for field, column in self.fields.items() if field != column}


def _did_you_mean(names: Iterable[str], known: Sequence[str]) -> str:
    close = [match for name in names for match in close_matches(name, known)]
    return f"; did you mean {', '.join(repr(c) for c in dict.fromkeys(close))}?" if close else ""


def _missing_column(column: str, field: str, columns: Sequence[str], source: str) -> InputError:
    return InputError(f"no column {column!r} (mapped to the {field}); found columns "
                      f"{list(columns)}{_did_you_mean([column], columns)}",
                      path=source, field=column)


def _no_ragas_columns(columns: Sequence[str], source: str) -> InputError:
    expected = [name for field in _CORE for name in RAGAS_COLUMNS[field]]
    known = [name for names in RAGAS_COLUMNS.values() for name in names]
    return InputError(
        f"no query, contexts or answer column found (found columns {list(columns)}; expected "
        f"some of {expected}, or map yours with --map FIELD=COLUMN)"
        f"{_did_you_mean(columns, known)}", path=source)


def plan_columns(columns: Sequence[str], field_map: Iterable[tuple[str, str]], source: str,
                 *, ragas: bool) -> ColumnPlan:
    """Which column holds each field: the map, then (``ragas``) ragas' default names."""
    fields: dict[str, str] = {}
    present = set(columns)
    for field, column in field_map:
        if column not in present:
            raise _missing_column(column, field, columns, source)
        fields[field] = column
    claimed = set(fields.values())
    defaults = RAGAS_COLUMNS if ragas else {}
    for field, names in defaults.items():
        found = [name for name in names if name in present and name not in claimed]
        if field in fields or not found:
            continue
        if len(found) > 1:
            raise InputError(f"columns {found} could each hold the {field}; choose one with "
                             f"--map {field}=COLUMN", path=source, field=found[1])
        fields[field] = found[0]
        claimed.add(found[0])
    if ragas and not any(field in fields for field in _CORE):
        raise _no_ragas_columns(columns, source)
    for column in columns:  # a column left under a field's name would be a second source of it
        if column not in claimed and column in fields:
            raise InputError(f"column {column!r} would be read as the {column}, which is read "
                             f"from column {fields[column]!r}; rename or drop one of them",
                             path=source, field=column)
    return ColumnPlan(fields, number_ids=ragas and "id" not in fields)


def _reference_cell(cell: str, source: str, line: int, column: str, literals: bool) -> Any:
    # As in the native CSV format: a list of strings is several references, anything else
    # (including "[1] see note") one reference as written.
    if cell.lstrip().startswith("["):
        try:
            value = json_cell(cell, source, line, column, literals=literals)
        except InputError:
            return cell
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value
    return cell


def _csv_value(field: str, cell: Any, source: str, line: int, column: str,
               literals: bool) -> Any:
    if field in ("contexts", "judgments"):
        return json_cell(cell, source, line, column, literals=literals)
    if field == "reference":
        return _reference_cell(cell, source, line, column, literals)
    return cell


def _frame_value(field: str, value: Any, source: str, line: int, column: str) -> Any:
    """The JSON form of a Parquet/Arrow value, as rageval's Parquet reader makes it."""
    if field in ("contexts", "judgments") and isinstance(value, str):
        return json_cell(value, source, line, column)
    if field == "contexts" and isinstance(value, list):
        return [{k: v for k, v in item.items() if v is not None} if isinstance(item, dict)
                else item for item in value]
    if field == "judgments" and isinstance(value, list) and all(
            isinstance(e, dict) and e.keys() == {"key", "value"} for e in value):
        return {entry["key"]: entry["value"] for entry in value}  # a map column
    if field == "judgments" and isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value


def _converted(table: Table, plan: ColumnPlan, source: str,
               literals: bool) -> Iterator[tuple[int, Any]]:
    claimed = set(plan.fields.values())
    columns = dict(plan.fields)
    for ordinal, (line, row) in enumerate(table.rows, 1):
        if not isinstance(row, dict):
            yield line, row  # validation names what it is
            continue
        out = {key: value for key, value in row.items() if key not in claimed}
        out.update((field, row[column]) for field, column in plan.fields.items()
                   if column in row)
        if table.cells != "json":  # CSV strings and polars values to the JSON form
            for field in list(out):
                column = columns.get(field, field)
                out[field] = (_csv_value(field, out[field], source, line, column, literals)
                              if table.cells == "csv"
                              else _frame_value(field, out[field], source, line, column))
        if plan.number_ids:
            out["id"] = str(ordinal)
        if literals and is_multi_turn(out):  # a ragas MultiTurnSample: a conversation
            out = multi_turn(out, source, line, columns.get("query", "query"))
        yield line, out


def renamed_errors(records: Iterator[Record], renames: Mapping[str, str]) -> Iterator[Record]:
    """``records``, with the field of a validation error renamed to the source column
    (``query`` -> ``question``, ``contexts[2].id`` -> ``retrieved_contexts[2].id``)."""
    try:
        yield from records
    except InputError as error:
        field = error.field or ""
        match = _HEAD.match(field)
        if match is None or match.group() not in renames:
            raise
        head, column = match.group(), renames[match.group()]
        message = error.message.replace(f"field {head!r}", f"field {column!r}")
        raise InputError(message, path=error.path, line=error.line,
                         field=column + field[match.end():]) from None


def records_from_table(table: Table, plan: ColumnPlan, source: str, *,
                       literals: bool = False) -> list[Record]:
    """Validate every row of ``table`` as a record, columns read as ``plan`` says."""
    rows = _converted(table, plan, source, literals)
    return list(renamed_errors(validate_records(rows, source, table.unit), plan.renames()))
