"""Checking an :class:`InputSpec` and reading what it names (see :func:`load`)."""

from __future__ import annotations

import os
from collections.abc import Callable

from rageval.core.errors import InputError, UsageError
from rageval.core.records import load_records
from rageval.core.records.model import Record
from rageval.inputs.columns import plan_columns, records_from_table
from rageval.inputs.files import input_format, line_limit
from rageval.inputs.spec import InputSpec, LoadedInputs
from rageval.inputs.tables import read_table

__all__ = ["load"]


def _table_records(spec: InputSpec, path: str, limit: int) -> list[Record]:
    """A records file (``records`` kind) or a ragas table, columns renamed by the map."""
    fmt = input_format(path, spec.format)
    if spec.kind == "records" and not spec.field_map and fmt != "arrow":
        # Exactly what rageval's own loader gives (streaming, native errors).
        return load_records(path, format=fmt, max_line_bytes=spec.max_line_bytes)
    table = read_table(path, fmt, spec.split, limit)
    if not table.rows:
        raise InputError("contains no records", path=path)
    ragas = spec.kind == "ragas"
    plan = plan_columns(table.columns, spec.field_map, path, ragas=ragas)
    return records_from_table(table, plan, path, literals=ragas)


def _run(spec: InputSpec, limit: int) -> LoadedInputs:
    from rageval.inputs.trec_run import load_run  # reads TREC files: the retrieval package

    return load_run(spec, os.fspath(spec.run or ""), limit)


def _trec_rag(spec: InputSpec, limit: int) -> LoadedInputs:
    from rageval.inputs.trec_rag import load_trec_rag

    path = os.fspath(spec.records or "")
    corpus = None if spec.corpus is None else os.fspath(spec.corpus)
    return LoadedInputs(load_trec_rag(path, spec.format, limit, corpus), path)


def _traces(spec: InputSpec, limit: int) -> LoadedInputs:
    from rageval.inputs.traces import references_of, trace_source, trace_windows

    join = references_of(spec)
    records = [record for window in trace_windows(spec, 10_000, join=join) for record in window]
    if join is None or join.qrels is None:
        return LoadedInputs(records, trace_source(spec))
    return LoadedInputs(records, trace_source(spec), qrels=join.qrels,
                        qrels_path=str(spec.references))


def _table(spec: InputSpec, limit: int) -> LoadedInputs:
    path = os.fspath(spec.records or "")
    return LoadedInputs(_table_records(spec, path, limit), path)


#: The reader of each kind of input (:meth:`InputSpec.reader`).
_READERS: dict[str, Callable[[InputSpec, int], LoadedInputs]] = {
    "run": _run, "trec-rag": _trec_rag, "records": _table, "ragas": _table,
    "openinference": _traces, "otel-genai": _traces,
}


def load(spec: InputSpec) -> LoadedInputs:
    """Read and validate what ``spec`` names (see :func:`rageval.inputs.load_inputs`)."""
    if not isinstance(spec, InputSpec):
        raise UsageError(f"expected an InputSpec, got {type(spec).__name__}")
    limit = line_limit(spec.max_line_bytes)
    return _READERS[spec.reader()](spec, limit)
