"""``rageval export RUN --format md|csv|junit|json``: a saved run in the formats CI systems
read, without scoring again, with the gate's checks when gate options are given."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, TextIO

from rageval.cli.secrets import run_masker
from rageval.core.errors import UsageError
from rageval.core.files import atomic_write
from rageval.core.outputs.text import terminal
from rageval.core.results import Results, count_of

if TYPE_CHECKING:
    from rageval.core.outputs.masking import Masker
    from rageval.gate.model import GateReport

__all__ = ["EXPORT_FORMATS", "run_export"]

EXPORT_FORMATS = ("md", "csv", "junit", "json")


def run_export(args: argparse.Namespace, out: TextIO) -> int:
    """Write the run in ``args.format`` to ``args.output`` (default: stdout); exit status 3
    when the gate given fails, as ``rageval score`` would."""
    results = Results.load(args.run)
    report = _gate(args, results)
    masker = run_masker(args)
    text = masker(_render(args.format, results, report, args.run, masker))
    if args.output:
        try:
            atomic_write(args.output, text)
        except OSError as error:
            raise UsageError(f"-o {args.output}: cannot write: {error.strerror or error}") \
                from None
    else:
        out.write(text)
    if report is not None and not report.passed:
        from rageval.gate import GATE_FAILED_EXIT

        # The exit status alone does not say why: name the failed checks, on stderr (stdout
        # may be the export itself).
        # The names come from the run's files, which need not be rageval's own: made safe.
        failed = "; ".join(f"{row.metric} {row.rule}" for row in report.failures)
        text = f"rageval: gate failed ({count_of(len(report.failures), 'check')}): {failed}"
        print(terminal(masker(text)), file=sys.stderr)
        return GATE_FAILED_EXIT
    return 0


def _render(fmt: str, results: Results, report: GateReport | None, name: str,
            masker: Masker) -> str:
    if fmt == "md":
        from rageval.gate.github import summary_markdown

        return summary_markdown(results, report, name, masker)
    if fmt == "junit":
        from rageval.gate.junit import junit_xml

        return junit_xml(results, report, name, masker)
    if fmt == "csv":
        return str(results.summary_frame("polars").write_csv())
    data = results.summary_json()
    if report is not None:
        data["gate"] = {"passed": report.passed,
                        "checks": [{k: None if isinstance(v, float) and math.isnan(v) else v
                                    for k, v in asdict(row).items()} for row in report.rows]}
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def _gate(args: argparse.Namespace, results: Results) -> GateReport | None:
    """The gate's checks of the saved run, when gate options are given."""
    texts = [(direction, text)
             for direction, given in (("under", args.fail_under), ("over", args.fail_over))
             for text in given or ()]
    if not texts and args.baseline is None:
        return None
    from rageval.gate import (
        GateReport,
        check_regression,
        check_thresholds,
        parse_threshold,
        unknown_threshold_names,
    )

    thresholds = [parse_threshold(text, direction) for direction, text in texts]
    unknown = unknown_threshold_names(thresholds, list(results.summary))
    if unknown:
        raise UsageError("; ".join(unknown))
    rows = check_thresholds(results, thresholds, on=args.gate_on)
    if args.baseline is not None:
        rows += check_regression(results, Results.load(args.baseline),
                                 max_drop=args.max_drop or 0.0,
                                 allow_data_change=args.allow_data_change)
    return GateReport(rows)
