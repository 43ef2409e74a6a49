"""Records from the formats RAG teams already have.

:func:`load_inputs` reads what an :class:`InputSpec` names and returns validated
:class:`~rageval.core.records.model.Record` objects:

* a records file (``kind="records"``, rageval's own format, with an optional field map),
* a ragas / Hugging Face ``datasets`` table (``kind="ragas"``: JSONL, JSON, CSV, Parquet, or
  the Arrow files ``datasets.save_to_disk`` writes),
* a TREC RAG 2024 generation run (``kind="trec-rag"``),
* a TREC run joined with query and document texts (``run=``; BEIR directories included).

Every problem is an :class:`~rageval.core.errors.InputError` naming the file, the line (or row)
and the field, as the native format's errors do. See ``docs/inputs.md``.

Importing this package is cheap: the readers (and polars) load on the first call.
"""

from __future__ import annotations

from rageval.inputs.spec import (
    INPUT_KINDS,
    MAP_FIELDS,
    InputSpec,
    LoadedInputs,
    parse_field_map,
)

__all__ = [
    "INPUT_KINDS",
    "MAP_FIELDS",
    "InputSpec",
    "LoadedInputs",
    "load_inputs",
    "parse_field_map",
]


def load_inputs(spec: InputSpec) -> LoadedInputs:
    """Read and validate the records ``spec`` names.

    Raises :class:`~rageval.core.errors.UsageError` for a spec that does not hold together (a
    run and a records file, an unknown kind or format, a map for a run) and
    :class:`~rageval.core.errors.InputError` for anything wrong in the files.
    """
    from dataclasses import replace

    from rageval.core.records.judgments import JudgmentsJoin
    from rageval.inputs.load import load

    loaded = load(spec)
    if loaded.qrels is None:
        return loaded
    join = JudgmentsJoin(loaded.qrels, qrels_source=loaded.qrels_path or "<qrels>",
                         records_source=loaded.source)
    return replace(loaded, records=join.fill(loaded.records), qrels=None)
