"""The gate's report as a terminal table: one row per check, failures in red."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from rageval.gate.model import GateReport
from rageval.gate.model import format_number as num

__all__ = ["gate_table"]


def gate_table(report: GateReport) -> Table:
    """Metric, rule, observed value, PASS/FAIL and the note of every check."""
    failed = len(report.failures)
    verdict = "passed" if report.passed else f"FAILED ({failed} of {len(report.rows)} checks)"
    table = Table(title=Text(f"gate: {verdict}"), title_justify="left")
    table.add_column("metric", style="bold")
    table.add_column("rule")
    table.add_column("observed", justify="right", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("note", overflow="fold")
    for row in report.rows:
        style = "" if row.passed else "red"
        # Text cells, not markup: names and notes hold brackets ("p(rel=2)@5", "CI [0.4, 0.6]").
        table.add_row(Text(row.metric), Text(row.rule), Text(num(row.observed)),
                      Text("PASS", style="green") if row.passed else Text("FAIL", style="bold"),
                      Text(row.note), style=style)
    return table
