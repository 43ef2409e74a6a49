"""Comparing runs: statistics, run-against-run comparison, and judge-human agreement.

- :mod:`~rageval.compare.stats`: bootstrap CIs, paired tests, multiple-testing correction;
- :mod:`~rageval.compare.runs`: ``rageval compare`` (:func:`compare_runs`), built on
  :mod:`~rageval.compare.run_pairing` (loading runs, pairing records by id),
  :mod:`~rageval.compare.comparison_stats` (the rows of a comparison) and
  :mod:`~rageval.compare.comparison_output` (tables, ``--json`` rows);
- :mod:`~rageval.compare.agree`: ``rageval agree``, the judge against human labels, built on
  :mod:`~rageval.compare.agreement_stats` (kappa, rank correlations, ...),
  :mod:`~rageval.compare.agree_inputs` (loading and matching runs and human labels),
  :mod:`~rageval.compare.agree_report` (the report's rows) and
  :mod:`~rageval.compare.agree_output` (its tables);
- :mod:`~rageval.compare.command_output`: the console and ``--json`` file both commands use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["compare_runs"]

if TYPE_CHECKING:
    from rageval.compare.runs import compare_runs


def __getattr__(name: str) -> Any:
    if name == "compare_runs":  # lazy: importing the package stays cheap
        from rageval.compare.runs import compare_runs

        return compare_runs
    raise AttributeError(f"module 'rageval.compare' has no attribute {name!r}")
