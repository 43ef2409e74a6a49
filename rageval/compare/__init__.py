"""Comparing runs: statistics, run-against-run comparison, and judge-human agreement.

- :mod:`~rageval.compare.stats`: bootstrap CIs, paired tests, multiple-testing correction;
- :mod:`~rageval.compare.runs`: ``rageval compare`` (:func:`compare_runs`);
- :mod:`~rageval.compare.agree`: ``rageval agree``, the judge against human labels.
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
