"""``rageval annotate RUN_DIR --metric M --labels FILE --plan WIDTH``: how many more labels,
uniform and active, the labels so far suggest are needed to bring the calibrated mean's 95%
interval to a half-width of WIDTH (:func:`rageval.stats.label_plan.plan_labels`), printed
instead of serving the page.

The labels so far are the file's standing labels of the metric, every annotator's, averaged
per record as the calibration averages them; labels an active walk chose count with the
probability each line records. On an active file the budget it names is for a walk started
again on the same file, which keeps every record the file decided and draws only the rest: the
labels it adds are what the new probabilities expect of those undecided records."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TextIO

import numpy as np

from rageval.annotate.run import LabellingRun, load_labelling_run
from rageval.annotate.walk import pool_uncertainty
from rageval.core.errors import UsageError
from rageval.core.labels import LabelLine, current_labels, read_labels
from rageval.core.results import count_of
from rageval.stats.active import selection_probabilities
from rageval.stats.label_plan import LabelPlan, plan_labels

__all__ = ["plan_command"]


def plan_command(args: argparse.Namespace, out: TextIO) -> int:
    width = args.plan
    if not (math.isfinite(width) and width > 0):
        raise UsageError(f"--plan: the half-width must be positive, got {width}")
    run = load_labelling_run(args.run_dir, args.metric, args.records)
    lines = _lines(args.labels, run)
    standing = current_labels(lines)[0]
    judged = np.array([item.score for item in run.items.values()])
    labels = np.full(len(judged), np.nan)
    chances: np.ndarray | None = None
    selections = {line.selection for line in standing}
    if len(selections) > 1:
        raise UsageError(f"{args.labels}: the labels of {run.metric} mix uniform and active "
                         "selection; plan each apart")
    if selections == {"active"}:
        chances = np.ones(len(judged))
    by_id: dict[str, list[LabelLine]] = {}
    for line in standing:
        by_id.setdefault(line.id, []).append(line)
    for index, record_id in enumerate(run.items):
        given = by_id.get(record_id)
        if given:
            labels[index] = float(np.mean([line.label for line in given]))
            if chances is not None:
                chances[index] = given[0].probability or 1.0
    spread = pool_uncertainty(run)
    plan = plan_labels(judged, labels, width, probabilities=chances, uncertainty=spread)
    text = _describe(plan, run.metric, "active" if chances is not None else "uniform")
    if chances is not None and plan.active_total is not None:
        decided = {line.id for line in lines}
        undecided = [k for k, record_id in enumerate(run.items) if record_id not in decided]
        text = _restart(text, plan.active_total, spread, undecided)
    out.write(text)
    return 0


def _lines(path: str, run: LabellingRun) -> list[LabelLine]:
    """The file's lines of the run's metric for records of its pool (a missing file: none
    yet)."""
    if not Path(path).exists():
        return []
    return [line for line in read_labels(path)
            if line.metric == run.metric and line.id in run.items]


def _restart(text: str, budget: int, spread: list[float], undecided: list[int]) -> str:
    """The active line of an active file's plan, said as what a walk started again with
    ``--budget`` adds: the chances the new budget gives the records the file has not
    decided."""
    head, _, _ = text.rpartition("  active: ")
    if not undecided:
        return head + (f"  active: the walk is complete; {count_of(budget, 'label')} "
                       f"expected in a new labels file (--select active --budget {budget})\n")
    expected = float(selection_probabilities(spread, budget)[undecided].sum())
    return head + (f"  active: about {expected:.0f} more labels expected from the "
                   f"{count_of(len(undecided), 'record')} the walk has not decided, started "
                   f"again on this file with --select active --budget {budget} (then label "
                   "to the end of the walk)\n")


def _describe(plan: LabelPlan, metric: str, selection: str) -> str:
    """The plan in words. One labels file keeps one selection, so the other selection's
    figure is a total for a new file, not more of this one."""
    head = (f"{metric}: {plan.labelled} of {plan.pool} records labelled so far ({selection}); "
            f"to bring the {plan.level:.0%} interval's half-width to {plan.width:g}:\n")
    if plan.refused is not None:
        return head + f"  no plan: {plan.refused}\n"
    rows = [("uniform", plan.uniform_total, plan.uniform_more, plan.uniform_reason,
             "--select uniform"),
            ("active", plan.active_total, plan.active_more, plan.active_reason,
             f"--select active --budget {plan.active_total}")]
    lines = [head]
    for name, total, more, reason, options in rows:
        expected = " expected" if name == "active" else ""
        if total is None:
            lines.append(f"  {name}: no number of labels reaches it ({reason})\n")
        elif name == selection:
            lines.append(f"  {name}: {count_of(more or 0, 'more label')}{expected} ({total} "
                         f"in all, {options})\n")
        else:
            lines.append(f"  {name}: {count_of(total, 'label')}{expected} in a new labels "
                         f"file ({options})\n")
    return "".join(lines)
