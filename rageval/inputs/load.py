"""Checking an :class:`InputSpec` and reading what it names (see :func:`load`)."""

from __future__ import annotations

import os

from rageval.core.errors import InputError, UsageError
from rageval.core.records import load_records
from rageval.core.records.model import Record
from rageval.inputs.columns import plan_columns, records_from_table
from rageval.inputs.files import input_format, line_limit
from rageval.inputs.spec import INPUT_KINDS, InputSpec, LoadedInputs, check_field_map
from rageval.inputs.tables import read_table

__all__ = ["load"]


def _check_run_spec(spec: InputSpec) -> None:
    if spec.records is not None:
        raise UsageError("give a records file or a run, not both")
    if spec.field_map:
        raise UsageError("a field map applies to a records file, not to a run")
    if spec.format is not None:
        raise UsageError("format applies to a records file, not to a run")
    if spec.beir is not None and (spec.queries is not None or spec.corpus is not None):
        raise UsageError("a BEIR directory gives the queries and the corpus: give it, or "
                         "queries and corpus files, not both")
    if spec.depth is not None and (isinstance(spec.depth, bool) or not isinstance(spec.depth, int)
                                   or spec.depth < 1):
        raise UsageError(f"depth must be a positive integer, got {spec.depth!r}")
    if not isinstance(spec.split, str) or not spec.split:
        raise UsageError(f"split must be a non-empty name, got {spec.split!r}")


def _check_records_spec(spec: InputSpec) -> None:
    if spec.kind not in INPUT_KINDS:
        raise UsageError(f"unknown input kind {spec.kind!r}; expected one of {list(INPUT_KINDS)}")
    check_field_map(spec.field_map)
    for name in ("queries", "beir", "depth"):
        if getattr(spec, name) is not None:
            raise UsageError(f"{name} applies to a run (give run=), not to a records file")
    if spec.corpus is not None and spec.kind != "trec-rag":
        raise UsageError("a corpus applies to a run or to a TREC RAG file (kind 'trec-rag')")
    if spec.kind == "trec-rag" and spec.field_map:
        raise UsageError("a field map does not apply to a TREC RAG file: its fields are fixed")


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


def load(spec: InputSpec) -> LoadedInputs:
    """Read and validate what ``spec`` names (see :func:`rageval.inputs.load_inputs`)."""
    if not isinstance(spec, InputSpec):
        raise UsageError(f"expected an InputSpec, got {type(spec).__name__}")
    limit = line_limit(spec.max_line_bytes)
    if spec.run is not None:
        _check_run_spec(spec)
        from rageval.inputs.runs import load_run  # reads TREC files: the retrieval package

        return load_run(spec, os.fspath(spec.run), limit)
    _check_records_spec(spec)
    if spec.records is None:
        raise UsageError("nothing to read: give a records file or a run")
    path = os.fspath(spec.records)
    if spec.kind == "trec-rag":
        from rageval.inputs.trec_rag import load_trec_rag

        corpus = None if spec.corpus is None else os.fspath(spec.corpus)
        records = load_trec_rag(path, spec.format, limit, corpus)
    else:
        records = _table_records(spec, path, limit)
    return LoadedInputs(records, path, None)
