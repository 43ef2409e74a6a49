"""One description of a gate row, which every channel renders: the terminal's table (built
here, :func:`gate_table`), the JUnit failure, the Markdown summary and the GitHub annotation.

Its figures are labelled, so that no channel shows one number as another: a threshold on the
mean gives ``mean 0.4766``; one on a CI bound gives ``value 0.4766, CI lower bound 0.41``; a
regression check gives ``value 0.4766, baseline 0.5339, difference -0.0573, drop 0.0573``, the
rule then saying what the drop had to be (``drop <= 0.02 vs baseline``).

The terminal's table has one row per check, failures in red, every text made safe for a
terminal (:func:`rageval.core.outputs.text.terminal`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from rageval.core.outputs.masking import NO_SECRETS, Masker
from rageval.core.outputs.text import terminal
from rageval.gate.model import GateReport, GateRow, format_number

__all__ = ["GateRowText", "describe", "gate_table"]


@dataclass(frozen=True)
class GateRowText:
    """A gate row in words: the metric, its labelled figures and the rule."""

    metric: str
    figures: tuple[tuple[str, str], ...]  # (label, number as shown)
    rule: str

    @property
    def figures_text(self) -> str:
        """``value 0.4766, baseline 0.5339, difference -0.0573, drop 0.0573`` (``-`` when the
        row has no number)."""
        return ", ".join(f"{label} {number}" for label, number in self.figures) or "-"

    @property
    def rule_text(self) -> str:
        """``value 0.4766, baseline 0.5339, ...; rule drop <= 0.02 vs baseline`` (the data
        check, which has no number, says its rule alone)."""
        figures = f"{self.figures_text}; " if self.figures else ""
        return f"{figures}rule {self.rule}"

    @property
    def sentence(self) -> str:
        """:attr:`rule_text` after the metric's name."""
        return f"{self.metric}: {self.rule_text}"


def describe(row: GateRow) -> GateRowText:
    """The labelled figures of ``row``: the run's value, then the baseline's and the
    difference (regression checks), then what the rule was applied to when that is not the
    value itself (a CI bound, a drop)."""
    figures: list[tuple[str, float | None]] = []
    if row.value is not None and row.label not in ("mean", "corpus", "value"):
        figures.append(("value", row.value))
    if row.check == "regression" and row.baseline is not None:
        figures += [("baseline", row.baseline), ("difference", row.delta)]
    if row.observed is not None:
        figures.append((row.label, row.observed))
    shown = tuple((label, _signed(number) if label == "difference" else format_number(number))
                  for label, number in figures)
    return GateRowText(row.metric, shown, row.rule)


def _signed(value: float | None) -> str:
    text = format_number(value)
    return text if value is None or value < 0 else "+" + text


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
