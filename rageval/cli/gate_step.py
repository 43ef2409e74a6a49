"""The gate of a scoring run on the command line: thresholds and a baseline checked before any
scoring (a typo or a missing baseline costs a second, not a judged run), applied after it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rageval.core.errors import UsageError
from rageval.core.outputs.masking import NO_SECRETS

if TYPE_CHECKING:
    from rich.console import Console

    from rageval.core.outputs.masking import Masker
    from rageval.core.results import Results
    from rageval.gate import GateReport, Threshold
    from rageval.judge.llm.options import JudgeOptions


@dataclass(frozen=True)
class GatePlan:
    thresholds: list[Threshold]
    on: str
    baseline: Results | None
    max_drop: float
    allow_data_change: bool = False

    def apply(self, results: Results, console: Console,
              masker: Masker = NO_SECRETS) -> GateReport:
        """Check the run and print the table of checks (``masker``: the run's secrets)."""
        from rageval.gate import GateReport, check_regression, check_thresholds, gate_table

        rows = check_thresholds(results, self.thresholds, on=self.on)
        if self.baseline is not None:
            # Seed 0, not the run's: the same pair of runs always gets the same verdict.
            rows += check_regression(results, self.baseline, max_drop=self.max_drop,
                                     allow_data_change=self.allow_data_change)
        report = GateReport(rows)
        console.print(gate_table(report, masker))
        return report


def plan_gate(args: argparse.Namespace, judge: JudgeOptions | None) -> GatePlan | None:
    """The run's gate from its options, checked against the metrics it asks for; None when
    there is nothing to check."""
    if args.max_drop is not None and args.baseline is None:
        raise UsageError("--max-drop is the largest drop against a baseline: give --baseline DIR")
    if getattr(args, "allow_data_change", False) and args.baseline is None:
        raise UsageError("--allow-data-change lets a baseline of other data be compared: "
                         "give --baseline DIR")
    if args.max_drop is not None and not args.max_drop >= 0:
        raise UsageError(f"--max-drop must be 0 or more, got {args.max_drop}")
    texts = [(direction, text)
             for direction, given in (("under", args.fail_under), ("over", args.fail_over))
             for text in given or ()]
    if not texts and args.baseline is None:
        return None  # nothing to check: the gate's code is not even loaded
    from rageval.gate import parse_threshold, unknown_threshold_names

    thresholds = [parse_threshold(text, direction) for direction, text in texts]
    unknown = unknown_threshold_names(thresholds, output_names(args.metrics, judge))
    if unknown:
        hint = (" (an evaluation file's [gate] names metrics of its own list: --no-gate skips "
                "it)" if getattr(args, "eval_file", None) is not None else "")
        raise UsageError("; ".join(unknown) + hint)
    baseline = None
    if args.baseline is not None:
        from rageval.core.results import Results

        baseline = Results.load(args.baseline)
    return GatePlan(thresholds, args.gate_on, baseline, args.max_drop or 0.0,
                    bool(getattr(args, "allow_data_change", False)))


def output_names(metrics: list[str], judge: JudgeOptions | None) -> list[str]:
    """Every output name the run's metrics write (ndcg@10, rouge2.precision, ...); the judge's
    options find rubrics in a --prompts-dir."""
    from rageval.core.metric import ScoreOptions
    from rageval.core.registry import create

    options = ScoreOptions(judge=judge)
    return [name for metric in metrics for name in create(metric, options).output_names()]
