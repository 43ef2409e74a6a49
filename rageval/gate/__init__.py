"""The CI gate: thresholds on a run's numbers and a regression check against a baseline run.

- :mod:`~rageval.gate.model`: :class:`Threshold` (``--fail-under``/``--fail-over``
  ``METRIC=VALUE``, :func:`parse_threshold`), :class:`GateRow`, :class:`GateReport` and
  :data:`GATE_FAILED_EXIT`, the exit status of a failed gate;
- :mod:`~rageval.gate.thresholds`: :func:`check_thresholds` (on the mean or the CI bound) and
  :func:`unknown_threshold_names` (typos caught before scoring), and the run figures a
  threshold can name (``cost_usd``, ``tokens``, ``requests``, ``failed_requests``);
- :mod:`~rageval.gate.regression`: :func:`check_regression`, ``rageval compare``'s paired
  statistics with a practical and a statistical bar, directions from
  :mod:`~rageval.gate.direction`;
- :mod:`~rageval.gate.describe`: one description of each checked row, which every channel
  renders, and :func:`gate_table`, the report as a terminal table.

Pure logic: the command line (flags, the ``[gate]`` table of a config file) lives in
:mod:`rageval.cli`; the pytest plugin (:mod:`rageval.pytest_plugin`) uses the same functions.
"""

from __future__ import annotations

from rageval.gate.describe import gate_table
from rageval.gate.direction import lower_is_better
from rageval.gate.model import (
    GATE_FAILED_EXIT,
    RUN_FIGURES,
    GateReport,
    GateRow,
    Threshold,
    format_number,
    parse_threshold,
)
from rageval.gate.regression import check_regression
from rageval.gate.thresholds import (
    GATE_ON,
    RunFigure,
    check_thresholds,
    rule_basis,
    run_figure,
    summary_note,
    unknown_threshold_names,
)

__all__ = [
    "GATE_FAILED_EXIT",
    "GATE_ON",
    "RUN_FIGURES",
    "GateReport",
    "GateRow",
    "RunFigure",
    "Threshold",
    "check_regression",
    "check_thresholds",
    "format_number",
    "gate_table",
    "lower_is_better",
    "parse_threshold",
    "rule_basis",
    "run_figure",
    "summary_note",
    "unknown_threshold_names",
]
