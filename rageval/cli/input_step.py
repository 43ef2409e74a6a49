"""Where a scoring run's records come from, from its options: a records file (rageval's own
format, ragas-style columns or a TREC RAG run, with ``--map``) or a TREC run joined with
queries, documents and judgments (``--run``, ``--beir``). Checked before anything is read."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rageval.core.errors import RagevalError, UsageError
from rageval.inputs import InputSpec, load_inputs, parse_field_map

if TYPE_CHECKING:
    from rageval.core.records import Record
    from rageval.core.results import Results


def input_spec(args: argparse.Namespace) -> InputSpec:
    records, run = args.records, args.run
    phoenix = getattr(args, "phoenix", None)
    if records is None and run is None and phoenix is None:
        raise UsageError("no records: give a records file, --run RUN to build them from a "
                         "TREC run, or --phoenix URL --project NAME to read traces")
    if phoenix is not None and (records is not None or run is not None) and not getattr(
            args, "phoenix_annotate", False):
        raise UsageError("--phoenix reads traces from the server: give it or a records file "
                         "(or --run), not both (with --phoenix-annotate it is where the scores "
                         "of a traces file go)")
    if getattr(args, "project", None) is not None and phoenix is None:
        raise UsageError("--project names the project of a Phoenix server: give --phoenix URL")
    if records is not None and run is not None:
        raise UsageError("give a records file or --run, not both")
    if run is None:
        for flag, value in (("--queries", args.queries), ("--beir", args.beir),
                            ("--depth", args.depth)):
            if value is not None:
                raise UsageError(f"{flag} goes with --run (a TREC run to build records from)")
        if args.corpus is not None and args.input_format != "trec-rag":
            raise UsageError("--corpus goes with --run or --input-format trec-rag")
    else:
        if args.field_map or args.input_format != "records":
            raise UsageError("--map and --input-format read a records file; --run reads a TREC "
                             "run")
        if args.beir is not None and (args.queries or args.corpus or args.qrels):
            raise UsageError("--beir DIR brings the queries, corpus and qrels/<split>.tsv: "
                             "leave out --queries, --corpus and --qrels")
    if args.depth is not None and args.depth < 1:
        raise UsageError(f"--depth must be at least 1, got {args.depth}")
    traces = args.input_format == "openinference" or (
        phoenix is not None and records is None and args.input_format != "otel-genai")
    return InputSpec(records=records, kind="openinference" if traces else args.input_format,
                     field_map=parse_field_map(args.field_map or ()), format=args.format,
                     run=run, queries=args.queries, corpus=args.corpus, beir=args.beir,
                     split=args.split, depth=args.depth,
                     phoenix=phoenix if records is None else None,
                     project=args.project if phoenix is not None and records is None else None,
                     trace_unit=getattr(args, "trace_unit", None) or "trace",
                     sessions=bool(getattr(args, "trace_sessions", False)),
                     references=getattr(args, "references", None),
                     since=getattr(args, "phoenix_since", None),
                     until=getattr(args, "phoenix_until", None))


def run_records(results: Results) -> list[Record] | None:
    """The records a scored run read, read again as it read them (for ``rageval report``);
    None when they were in memory or a file is no longer there."""
    from rageval.report.html.page import load_run_records

    inputs = results.records_info.inputs
    if inputs is None:
        return load_run_records(results)
    spec = InputSpec.from_manifest(inputs)
    if spec.is_plain():
        return load_run_records(results)
    named = [spec.records, spec.run, spec.queries, spec.corpus, spec.beir, spec.references]
    if not all(Path(path).exists() for path in named if path is not None):
        return None
    if spec.phoenix is not None:  # a server: the report goes without texts when it is away
        try:
            return load_inputs(spec).records
        except RagevalError:  # away, refusing, or its client not installed
            return None
    return load_inputs(spec).records
