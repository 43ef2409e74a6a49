"""How ``rageval agree`` prints its report: the raters, a summary table with one row per
compared pair, one confusion matrix per pair, then notes and signatures; names, paths and
reasons (text rageval did not write) made safe for a terminal and a CI log by
:func:`rageval.core.outputs.text.terminal`, and given to rich as text, never as markup."""

from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rageval.compare.agree.report import AgreementReport, AgreementRow
from rageval.core.outputs.text import terminal

__all__ = ["confusion_table", "render_agreement", "report_lines", "summary_table"]


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def summary_table(report: AgreementReport) -> Table:
    """One row per compared pair: n, exact and adjacent agreement, kappa, rho, tau-b, means."""
    table = Table(title="rageval agreement", title_justify="left")
    for name, justify in (("metric", "left"), ("raters", "left"), ("n", "right"),
                          ("left out", "right"), ("exact", "right"), ("±1", "right"),
                          ("kappa (quad.)", "right"), ("spearman", "right"),
                          ("kendall tau-b", "right"), ("mean 1st", "right"),
                          ("mean 2nd", "right"), ("diff", "right")):
        table.add_column(name, justify=justify, style="bold" if name == "metric" else None)
    for row in report.rows:
        s = row.stats
        diff = None if s.mean_diff is None else f"{s.mean_diff:+.3f}"
        table.add_row(Text(terminal(row.metric)), Text(terminal(f"{row.rater_a} vs {row.rater_b}")),
                      str(s.n),
                      str(row.total - s.n), _fmt(s.exact), _fmt(s.adjacent), _fmt(s.kappa),
                      _fmt(s.spearman), _fmt(s.kendall), _fmt(s.mean_a), _fmt(s.mean_b),
                      diff or "—")
    return table


def confusion_table(row: AgreementRow) -> Table:
    """The confusion matrix over the full scale: rows the first rater, columns the second."""
    lo, hi = row.stats.scale
    grades = list(range(lo, hi + 1))
    table = Table()
    table.add_column(Text(terminal(f"{row.rater_a} \\ {row.rater_b}")), justify="right",
                     style="bold")
    for grade in grades:
        table.add_column(str(grade), justify="right")
    table.add_column("total", justify="right", style="dim")
    counts = np.array(row.stats.confusion, dtype=np.int64).reshape(len(grades), len(grades))
    for grade, line in zip(grades, counts, strict=True):
        table.add_row(str(grade), *(str(int(v)) for v in line), str(int(line.sum())))
    table.add_row("total", *(str(int(v)) for v in counts.sum(axis=0)), str(row.stats.n),
                  style="dim")
    return table


def report_lines(report: AgreementReport) -> list[str]:
    """Notes, what was left out and why, undefined statistics, and each metric's signature
    (a number without its signature is not reproducible)."""
    lines = list(report.notes)
    for row in report.rows:
        for reason, count in row.left_out.items():
            lines.append(f"{row.title}: {count} left out: {reason}")
        for stat, reason in row.stats.undefined.items():
            lines.append(f"{row.title}: {stat} undefined: {reason}")
        if row.stats.rounded:
            lines.append(f"{row.title}: {row.stats.rounded} non-integer scores (means of "
                         "several samples) rounded half up for exact/±1 agreement, kappa and "
                         "the confusion matrix; correlations use the raw values")
    seen: set[tuple[str, str]] = set()
    for row in report.rows:
        for rater, metric, signature in ((row.rater_a, row.metric_a, row.signature_a),
                                         (row.rater_b, row.metric_b, row.signature_b)):
            if signature and (rater, metric) not in seen:
                seen.add((rater, metric))
                lines.append(f"{rater} {metric}: {signature}")
    return lines


def render_agreement(report: AgreementReport, console: Console) -> None:
    """Print who the raters are, the summary table, one confusion matrix per pair, then the
    notes and signatures."""
    for rater in report.raters:
        console.print(terminal(f"{rater.label}: {rater.describe()}"), markup=False,
                      highlight=False)
    console.print(summary_table(report))
    for row in report.rows:
        # The heading is printed, not a table title: rich wraps titles to the table's width.
        heading = f"{row.title}: rows {row.rater_a}, columns {row.rater_b}, n={row.stats.n}"
        console.print(terminal(heading), markup=False, highlight=False)
        console.print(confusion_table(row))
    for line in report_lines(report):
        console.print(terminal(line), markup=False, highlight=False)
