"""Results as data frames (polars or pandas): the columns :class:`~rageval.core.results.Results`
builds, made into the frame of the backend asked for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rageval.core.calibration import Calibration
from rageval.core.errors import MissingDependencyError, UsageError

__all__ = ["calibration_columns", "frame"]

_TEXT = frozenset({"id", "metric", "aggregate", "signature", "errors", "details",
                   "conversation"})
_INTEGER = frozenset({"n", "unscored", "turn"})


def frame(columns: dict[str, list[Any]], backend: str) -> Any:
    """``columns`` (name -> values) as a polars or pandas frame; text, integer and float
    columns by name, as the results' frames have them."""
    if backend == "polars":
        import polars as pl

        schema = {k: pl.String if k in _TEXT else (pl.Int64 if k in _INTEGER else pl.Float64)
                  for k in columns}
        return pl.DataFrame(columns, schema=schema)
    if backend == "pandas":
        try:
            import pandas as pd
        except ImportError:
            raise MissingDependencyError("pandas", "pandas") from None
        return pd.DataFrame(columns)
    raise UsageError(f"unknown DataFrame backend {backend!r}: use 'polars' or 'pandas'")


def calibration_columns(items: Sequence[Calibration | None]) -> dict[str, list[Any]]:
    """The summary frame's columns of judge means calibrated by human labels."""
    def pick(get: Any) -> list[Any]:
        return [None if c is None else get(c) for c in items]

    return {
        "calibrated": pick(lambda c: c.mean),
        "calibrated_ci95_low": pick(lambda c: c.ci95[0] if c.ci95 else None),
        "calibrated_ci95_high": pick(lambda c: c.ci95[1] if c.ci95 else None),
        "human_mean": pick(lambda c: c.human_mean),
        "labelled": pick(lambda c: c.labelled),
        "unlabelled": pick(lambda c: c.unlabelled),
    }
