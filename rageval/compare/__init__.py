"""Comparing runs, run against run and judge against judge or people.

- :mod:`~rageval.compare.runs`: ``rageval compare``
  (:func:`~rageval.compare.runs.compare.compare_runs`): runs paired by record id, each metric's
  paired difference, interval and test, tables and JSON;
- :mod:`~rageval.compare.agree`: ``rageval agree``: agreement between judges, or with human
  labels (kappa, rank correlations, ...), and its tables;
- :mod:`~rageval.compare.command_output`: the console and ``--json`` file both commands use.

The statistics beneath them (bootstrap CIs, paired tests, Holm's correction) are in
:mod:`rageval.stats`; the commands themselves in :mod:`rageval.cli`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["compare_runs"]

if TYPE_CHECKING:
    from rageval.compare.runs.compare import compare_runs


def __getattr__(name: str) -> Any:
    if name == "compare_runs":  # lazy: importing the package stays cheap
        from rageval.compare.runs.compare import compare_runs

        return compare_runs
    raise AttributeError(f"module 'rageval.compare' has no attribute {name!r}")
