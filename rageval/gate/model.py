"""The gate's vocabulary: a threshold, one checked row, a report, and the exit status of a failed
gate.

A threshold names an output of the run as ``Results.summary`` spells it (``ndcg@10``,
``judge:faithfulness``, ``rouge2.fmeasure``) or a run figure read from the manifest
(:data:`RUN_FIGURES`), a limit, and the side that fails: ``under`` (a minimum, ``--fail-under``)
or ``over`` (a maximum, ``--fail-over``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from rageval.core.errors import UsageError

__all__ = ["DIRECTIONS", "GATE_FAILED_EXIT", "RUN_FIGURES", "GateReport", "GateRow", "Threshold",
           "format_number", "parse_threshold"]

# Exit status of a run whose gate fails. 2 is bad input or usage and 1 a metric that scored
# nothing, so a CI log tells "the numbers are too low" apart from "the run is broken".
GATE_FAILED_EXIT = 3

# Figures of the run as a whole, read from the manifest rather than the metrics' summary.
RUN_FIGURES: tuple[str, ...] = ("cost_usd", "tokens", "requests", "failed_requests")

DIRECTIONS: tuple[str, ...] = ("under", "over")


@dataclass(frozen=True)
class Threshold:
    """Fail when ``metric`` is under (``direction="under"``) or over (``"over"``) ``limit``."""

    metric: str
    limit: float
    direction: str

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise UsageError(f"threshold direction must be 'under' or 'over', "
                             f"got {self.direction!r}")
        if not self.metric:
            raise UsageError("a threshold needs a metric name")
        if isinstance(self.limit, bool) or not isinstance(self.limit, numbers.Real) \
                or not math.isfinite(self.limit):
            raise UsageError(f"threshold {self.metric}: the limit must be a finite number, "
                             f"got {self.limit!r}")
        # One type whatever was given (an int, a numpy float): equal thresholds compare equal.
        object.__setattr__(self, "limit", float(self.limit))

    @property
    def operator(self) -> str:
        """The comparison a passing value satisfies: ``>=`` for a minimum, ``<=`` a maximum."""
        return ">=" if self.direction == "under" else "<="

    def holds(self, value: float) -> bool:
        """Whether ``value`` passes (the limit itself passes on both sides)."""
        return value >= self.limit if self.direction == "under" else value <= self.limit


def parse_threshold(text: str, direction: str) -> Threshold:
    """``"ndcg@10=0.45"`` as a :class:`Threshold` on ``direction``'s side.

    The text is split on its *last* ``=``: metric names hold ``=`` themselves
    (``p(rel=2)@5=0.3``). Raises :class:`UsageError` naming the text when there is no ``=``, no
    metric or no finite number after it.
    """
    metric, equals, value = text.rpartition("=")
    example = "expected METRIC=VALUE, e.g. 'ndcg@10=0.45'"
    if not equals or not metric.strip():
        raise UsageError(f"bad threshold {text!r}: {example}")
    try:
        limit = float(value)
    except ValueError:
        raise UsageError(f"bad threshold {text!r}: {value.strip()!r} is not a number "
                         f"({example})") from None
    if not math.isfinite(limit):
        raise UsageError(f"bad threshold {text!r}: the limit must be a finite number")
    return Threshold(metric.strip(), limit, direction)


@dataclass(frozen=True)
class GateRow:
    """One check of the gate and its outcome.

    ``observed`` is the number the rule was applied to (the mean, a CI bound, a run figure, a
    drop against the baseline), None when there is none (unscored, unknown name); ``label``
    says which (``mean``, ``CI lower bound``, ``drop``, ...). ``value`` is the run's own value
    of the metric where the rule applies to something else (a drop, a CI bound).
    """

    check: str  # "threshold" or "regression"
    metric: str
    rule: str  # ">= 0.45 (mean)", "<= 0.1 (CI upper bound)", "drop <= 0.02 vs baseline"
    observed: float | None
    passed: bool
    note: str
    # A regression check's numbers: the baseline's value, the change (this run's less the
    # baseline's) and the Holm-adjusted p-value of the paired randomization test.
    baseline: float | None = None
    delta: float | None = None
    p_value: float | None = None
    label: str = "value"
    value: float | None = None


@dataclass(frozen=True)
class GateReport:
    """Every check of one gate; it passes when every row passes (an empty gate passes)."""

    rows: list[GateRow]

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    @property
    def failures(self) -> list[GateRow]:
        return [row for row in self.rows if not row.passed]


def format_number(value: float | None) -> str:
    """A number as the gate prints it: up to 4 decimals (``3.625``, ``4.0``, ``0.4167``);
    significant digits for the very small or large (a cost of ``1.2e-05``)."""
    if value is None or math.isnan(value):
        return "-"
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        return repr(round(float(value), 4))
    return f"{value:.4g}"
