"""rageval's pytest plugin: quality gates as ordinary tests.

Registered through the ``pytest11`` entry point, so any project that installs rageval gets:

- the fixture ``rag_evaluate``: :func:`rageval.evaluate` (same arguments, same
  :class:`~rageval.core.results.Results`), whose results are also written under
  ``--rageval-out DIR`` when that option is given (``DIR/<test id>``, a CI artifact);
- :func:`assert_rag_quality`, importable from here: minimums, maximums and a baseline
  comparison, failing with one readable line per failed check::

      from rageval.pytest_plugin import assert_rag_quality

      def test_answers(rag_evaluate, records):
          results = rag_evaluate(records, ["rouge1", "p@3"])
          assert_rag_quality(results, {"rouge1": 0.4, "p@3": 0.5})

pytest loads this module in every session of every project that installs rageval: it imports
nothing heavy (polars, numpy, rich) until a test uses it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from rageval.core.results import Results
    from rageval.gate.model import GateRow, Threshold

__all__ = ["assert_rag_quality", "rag_evaluate"]

# Longest directory name written under --rageval-out (file systems stop at 255 bytes).
_MAX_NAME = 150


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rageval", "rageval (RAG evaluation)")
    group.addoption("--rageval-out", metavar="DIR", default=None,
                    help="write every result of the rag_evaluate fixture under DIR/<test id> "
                    "(records.jsonl + summary.json, e.g. as a CI artifact)")


@pytest.fixture
def rag_evaluate(request: pytest.FixtureRequest) -> Callable[..., Results]:
    """:func:`rageval.evaluate` for a test: ``rag_evaluate(records, metrics, **kwargs)``.

    With ``--rageval-out DIR`` each result is also written to ``DIR/<test id>`` (the second
    call of one test to ``DIR/<test id>-2``, and so on).
    """
    out = request.config.getoption("rageval_out")
    calls = 0

    from rageval.api import evaluate  # here, not at import: only tests that use it pay

    @functools.wraps(evaluate)
    def run(records: Any, metrics: Iterable[Any], **kwargs: Any) -> Results:
        nonlocal calls
        results = evaluate(records, metrics, **kwargs)
        if out:
            calls += 1
            base = request.config.invocation_params.dir / out
            name = run_dir_name(request.node.nodeid)
            results.write(base / (name if calls == 1 else f"{name}-{calls}"))
        return results

    return run


def run_dir_name(nodeid: str) -> str:
    """A test id as one directory name: ``tests/test_a.py::test_b[x/y]`` ->
    ``tests_test_a.py__test_b_x_y_``; a long id is cut and keeps a hash, so names stay unique."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", nodeid).strip(".") or "test"
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:12]
        name = f"{name[:_MAX_NAME - 13]}-{digest}"
    return name


def assert_rag_quality(
    results: Results | str | os.PathLike[str],
    under: Mapping[str, float] | None = None,
    *,
    over: Mapping[str, float] | None = None,
    on: str = "mean",
    baseline: Results | str | os.PathLike[str] | None = None,
    max_drop: float | None = None,
) -> None:
    """Fail the test unless ``results`` (a run, or a run directory) meets every check.

    ``under`` maps output names to minimums (fail when under), ``over`` to maximums (fail when
    over); names may be run figures (``cost_usd``, ``tokens``, ``requests``,
    ``failed_requests``). ``on="ci"`` compares the 95% CI bound instead of the mean.
    ``baseline`` (a run or a run directory) adds the regression check of every headline metric
    both runs have: fail when one drops by more than ``max_drop`` (default 0) and the paired
    randomization test says the drop is real. See :mod:`rageval.gate`.
    """
    __tracebackhide__ = True
    from rageval.core.errors import UsageError
    from rageval.gate import Threshold, check_regression, check_thresholds

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
                                 max_drop=0.0 if max_drop is None else max_drop)
    message = quality_message(run, thresholds, rows, on)
    if message:
        raise AssertionError(message)


def quality_message(results: Results, thresholds: list[Threshold], rows: list[GateRow],
                    on: str) -> str:
    """The failure message: failed checks, names not in the results, then those that passed
    (one short line); empty when every check passed. ``rows`` starts with one row per
    threshold, in order, then the regression rows."""
    from rageval.gate import RUN_FIGURES

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
    from rageval.gate import format_number, rule_basis

    if threshold is None:  # a regression check
        return f"{row.metric}: {row.note} (allowed: {row.rule})"
    if row.observed is None:
        return f"{row.metric}: {row.note}; needs {row.rule}"
    basis = rule_basis(threshold, results.summary.get(threshold.metric), on)
    sign = "<" if threshold.direction == "under" else ">"
    return (f"{row.metric}: {format_number(row.observed)} {sign} "
            f"{format_number(threshold.limit)} ({basis}; {row.note})")


def _passed_line(row: GateRow) -> str:
    from rageval.gate import format_number

    if row.check == "regression":
        return f"{row.metric} {row.rule}"
    return f"{row.metric} {format_number(row.observed)} {row.rule}"


def _load(run: Results | str | os.PathLike[str]) -> Results:
    from rageval.core.results import Results

    return run if isinstance(run, Results) else Results.load(Path(run))
