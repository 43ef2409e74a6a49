"""``assert_rag_quality``: the gate's checks as one assertion, for tests (the pytest plugin
re-exports it) and notebooks; it needs no pytest."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from rageval.core.errors import UsageError
from rageval.core.results import Results
from rageval.gate.model import RUN_FIGURES, GateRow, Threshold, format_number
from rageval.gate.regression import check_regression
from rageval.gate.thresholds import check_thresholds, rule_basis

__all__ = ["assert_rag_quality", "quality_message"]


def assert_rag_quality(
    results: Results | str | os.PathLike[str],
    under: Mapping[str, float] | None = None,
    *,
    over: Mapping[str, float] | None = None,
    on: str = "mean",
    baseline: Results | str | os.PathLike[str] | None = None,
    max_drop: float | None = None,
    allow_data_change: bool = False,
) -> None:
    """Fail the test unless ``results`` (a run, or a run directory) meets every check.

    ``under`` maps output names to minimums (fail when under), ``over`` to maximums (fail when
    over); names may be run figures (``cost_usd``, ``tokens``, ``requests``,
    ``failed_requests``). ``on="ci"`` compares the 95% CI bound instead of the mean.
    ``baseline`` (a run or a run directory) adds the regression check of every headline metric
    both runs have: fail when one drops by more than ``max_drop`` (default 0) and the paired
    randomization test says the drop is real; a baseline that scored another evaluation set
    fails unless ``allow_data_change``. See :mod:`rageval.gate`.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this function's
    if max_drop is not None and baseline is None:
        raise UsageError("max_drop needs a baseline to compare with")
    thresholds = [Threshold(m, v, "under") for m, v in (under or {}).items()]
    thresholds += [Threshold(m, v, "over") for m, v in (over or {}).items()]
    if not thresholds and baseline is None:
        raise UsageError("assert_rag_quality needs minimums, over= maximums or a baseline")
    run = _load(results)
    rows = check_thresholds(run, thresholds, on=on)
    if baseline is not None:
        rows += check_regression(run, _load(baseline),
                                 max_drop=0.0 if max_drop is None else max_drop,
                                 allow_data_change=allow_data_change)
    message = quality_message(run, thresholds, rows, on)
    if message:
        raise AssertionError(message)


def quality_message(results: Results, thresholds: list[Threshold], rows: list[GateRow],
                    on: str) -> str:
    """The failure message: failed checks, names not in the results, then those that passed
    (one short line); empty when every check passed. ``rows`` starts with one row per
    threshold, in order, then the regression rows."""
    unknown = {t.metric for t in thresholds
               if t.metric not in RUN_FIGURES and t.metric not in results.summary}
    failed, missing, passed = [], [], []
    for k, row in enumerate(rows):
        threshold = thresholds[k] if k < len(thresholds) else None
        if row.passed:
            passed.append(_passed_line(row))
        elif threshold is not None and threshold.metric in unknown:
            missing.append(f"  {row.metric}: {row.note}")
        else:
            failed.append("  " + _failed_line(results, row, threshold, on))
    if not failed and not missing:
        return ""
    lines = [f"RAG quality check failed: {len(failed) + len(missing)} of {len(rows)} checks",
             *failed]
    if missing:
        lines += ["not in the results:", *missing]
    if passed:
        lines.append("passed: " + "; ".join(passed))
    return "\n".join(lines)


def _failed_line(results: Results, row: GateRow, threshold: Threshold | None, on: str) -> str:
    """``judge:faithfulness: 3.625 < 4.0 (mean; 95% CI [3.25, 4.0], n=8)``."""
    if threshold is None:  # a regression check
        return f"{row.metric}: {row.note} (allowed: {row.rule})"
    if row.observed is None:
        return f"{row.metric}: {row.note}; needs {row.rule}"
    basis = rule_basis(threshold, results.summary.get(threshold.metric), on)
    sign = "<" if threshold.direction == "under" else ">"
    return (f"{row.metric}: {format_number(row.observed)} {sign} "
            f"{format_number(threshold.limit)} ({basis}; {row.note})")


def _passed_line(row: GateRow) -> str:
    if row.check == "regression":
        return f"{row.metric} {row.rule}"
    return f"{row.metric} {format_number(row.observed)} {row.rule}"


def _load(run: Results | str | os.PathLike[str]) -> Results:
    return run if isinstance(run, Results) else Results.load(Path(run))
