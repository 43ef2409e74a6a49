"""``rageval report``: one self-contained HTML page of one or more runs (compared when there
are two or more), and the same page beside a run as ``rageval score --report`` writes it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rageval.cli.input_step import run_records
from rageval.compare.command_output import console_for
from rageval.core.errors import UsageError
from rageval.core.outputs.text import terminal

if TYPE_CHECKING:
    from rageval.core.results import Results

__all__ = ["run_report", "write_run_report"]


def run_report(args: argparse.Namespace, out: TextIO) -> int:
    """``rageval report``: load the runs, compare them when there are two or more, and write
    one self-contained HTML file."""
    from rageval.compare.runs.compare import compare_runs
    from rageval.core.results import Results
    from rageval.report.html.page import build_report, write_report

    names = list(args.runs)
    if args.baseline is not None and args.baseline not in names:
        names.insert(0, args.baseline)
    loaded = [(name, Results.load(name)) for name in names]
    rows = None
    if len(loaded) > 1:
        comparison = compare_runs([r for _, r in loaded], names=names, baseline=args.baseline,
                                  intersect=args.intersect, resamples=args.resamples,
                                  permutations=args.permutations, seed=args.seed,
                                  ci=args.ci)
        rows = comparison.rows
    records = {name: found for name, results in loaded
               if (found := run_records(results)) is not None}
    page = build_report(loaded, rows, records_by_run=records, title=args.title)
    try:
        written = write_report(args.output, page)
    except OSError as err:
        raise UsageError(f"-o {args.output}: cannot write: {err}") from None
    missing = [name for name, _ in loaded if name not in records]
    console = console_for(out)
    if missing:
        console.print(terminal("queries and answers not shown for " + ", ".join(missing)
                               + ": the records file named in the manifest is not readable "
                               "from here"), markup=False)
    console.print(terminal(f"wrote {written}"), markup=False)
    return 0


def write_run_report(results: Results, name: str, page: Path) -> None:
    """The run's HTML report at ``page``, as ``rageval report DIR -o page`` writes it."""
    from rageval.report.html.page import build_report, write_report

    records = {name: found} if (found := run_records(results)) is not None else None
    try:
        write_report(page, build_report([(name, results)], None, records_by_run=records))
    except OSError as err:
        raise UsageError(f"--report {page}: cannot write: {err}") from None
