"""The gate's report as a terminal table: one row per check, failures in red; each row said
from its one description (:func:`rageval.gate.describe.describe`), every text made safe for a
terminal (:func:`rageval.core.outputs.text.terminal`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from rageval.core.outputs.masking import NO_SECRETS, Masker
from rageval.core.outputs.text import terminal
from rageval.gate.describe import describe
from rageval.gate.model import GateReport

__all__ = ["gate_table"]


def gate_table(report: GateReport, masker: Masker = NO_SECRETS) -> Table:
    """Metric, rule, labelled figures (the value, the baseline's, the difference), PASS/FAIL
    and the note of every check, every credential ``masker`` knows masked."""
    mask = masker

    def cell(text: str, style: str = "") -> Text:
        return Text(terminal(mask(text)), style=style)

    failed = len(report.failures)
    verdict = "passed" if report.passed else f"FAILED ({failed} of {len(report.rows)} checks)"
    table = Table(title=Text(f"gate: {verdict}"), title_justify="left")
    table.add_column("metric", style="bold")
    table.add_column("rule")
    table.add_column("figures", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("note", overflow="fold")
    for row in report.rows:
        style = "" if row.passed else "red"
        # Text cells, not markup: names and notes hold brackets ("p(rel=2)@5", "CI [0.4, 0.6]").
        table.add_row(cell(row.metric), cell(row.rule), cell(describe(row).figures_text),
                      Text("PASS", style="green") if row.passed else Text("FAIL", style="bold"),
                      cell(row.note), style=style)
    return table
