"""The report's comparison section, shown for two or more runs: the table of the rows of
:mod:`rageval.compare.runs.compare` (one per system and metric: values, delta, its CI, p-values,
wins/ties/losses, signature mismatches) and the forest plot of the headline deltas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rageval.core.outputs.significance import (
    SIGNIFICANCE_LEGEND,
    p_value_text,
    significance_mark,
)
from rageval.report.html.data import ReportRun, as_finite, ci_excludes_zero, ci_pair, mismatch_text
from rageval.report.html.markup import ci_text, esc, num_cell, swatch, table, th
from rageval.report.html.plots import PLOT_WIDTH_IN, draw_forest, render_svg


def comparison_section(runs: list[ReportRun], rows: list[dict[str, Any]]) -> str:
    has_headline = any("headline" in row for row in rows)
    head = [th("metric", key="metric", kind="text"), th("baseline", key="baseline", kind="text"),
            th("system", key="system", kind="text"),
            th("baseline value", key="baseline_value", kind="num", numeric=True),
            th("system value", key="system_value", kind="num", numeric=True),
            th("Δ", key="delta", kind="num", numeric=True, title="system − baseline"),
            th("95% CI of Δ", numeric=True),
            th("p", key="p_value", kind="num", numeric=True),
            th("p (adj.)", key="p_adjusted", kind="num", numeric=True,
               title="adjusted for multiple comparisons"),
            th("W / T / L", title="records where the system wins, ties, loses"),
            th("n", key="n", kind="num", numeric=True), th("flags")]
    colors = {run.name: run.color for run in runs}
    body = [_comparison_row(row, colors, has_headline) for row in rows]
    forest = _forest_figure(runs, _headline_rows(rows))
    note = ('<p class="note">Δ = system − baseline on the records both runs scored. '
            f"Significance from the adjusted p-value where given: {esc(SIGNIFICANCE_LEGEND)}. "
            "Δ is coloured when its 95% CI excludes zero. "
            '<span class="flag">⚠ signature</span> marks metrics whose configuration differs '
            "between the runs.</p>")
    return ('<section id="comparison"><h2>Comparison</h2>'
            + table("comparison-table", head, body) + note + forest + "</section>")


def _comparison_row(row: Mapping[str, Any], colors: Mapping[str, str], has_headline: bool) -> str:
    direction = ci_excludes_zero(row)
    delta_class = {1: "up", -1: "down"}.get(direction, "")
    stars = significance_mark(_significance(row))
    mismatch = mismatch_text(row.get("signature_mismatch"))
    flags = (f'<span class="flag" title="{esc(mismatch)}">⚠ signature</span>' if mismatch
             else "")
    wins, ties, losses = (row.get(k) for k in ("wins", "ties", "losses"))
    wtl = " / ".join("—" if v is None else esc(v) for v in (wins, ties, losses))
    row_class = ("headline" if row.get("headline") else "component") if has_headline else ""
    cells = [
        f'<td data-s="{esc(row.get("metric", ""))}">{esc(row.get("metric", ""))}</td>',
        _name_cell(row.get("baseline"), colors),
        _name_cell(row.get("system"), colors),
        num_cell(row.get("baseline_value")),
        num_cell(row.get("system_value")),
        num_cell(row.get("delta"), extra_class=delta_class),
        f'<td class="num">{ci_text(ci_pair(row.get("ci95")))}</td>',
        num_cell(row.get("p_value")),
        _p_cell(row.get("p_adjusted"), stars),
        f'<td class="num">{wtl}</td>',
        num_cell(row.get("n")),
        f"<td>{flags}</td>",
    ]
    class_attr = f' class="{row_class}"' if row_class else ""
    return f"<tr{class_attr}>{''.join(cells)}</tr>\n"


def _significance(row: Mapping[str, Any]) -> float | None:
    """The p-value to judge a row by: adjusted for multiple comparisons when available."""
    adjusted = as_finite(row.get("p_adjusted"))
    return adjusted if adjusted is not None else as_finite(row.get("p_value"))


def _headline_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if any("headline" in row for row in rows):
        return [row for row in rows if row.get("headline")]
    return rows


def _p_cell(value: Any, stars: str) -> str:
    number = as_finite(value)
    data = "" if number is None else repr(number)
    mark = f' <span class="stars">{stars}</span>' if stars else ""
    return f'<td class="num" data-v="{data}">{esc(p_value_text(number))}{mark}</td>'



def _name_cell(name: Any, colors: Mapping[str, str]) -> str:
    text = "" if name is None else str(name)
    marker = swatch(colors[text]) if text in colors else ""
    return f'<td data-s="{esc(text)}">{marker}{esc(text)}</td>'


def _forest_figure(runs: list[ReportRun], rows: list[dict[str, Any]]) -> str:
    """One panel per metric (metrics have different scales), one row per system."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if as_finite(row.get("delta")) is not None:
            groups.setdefault(str(row.get("metric", "")), []).append(row)
    if not groups:
        return '<p class="note">No deltas to plot.</p>'
    baselines = {str(row.get("baseline")) for group in groups.values() for row in group}
    height = 0.45 + sum(0.5 + 0.26 * len(group) for group in groups.values())
    svg = render_svg(lambda fig: draw_forest(fig, groups, len(baselines) > 1),
                     height=height, width=PLOT_WIDTH_IN * 1.25, prefix="forest-",
                     label="forest plot of deltas with 95% CIs")
    one = next(iter(baselines)) if len(baselines) == 1 else None
    caption = ("<b>Δ against the baseline</b>"
               + (f" {esc(one)}" if one is not None else "")
               + '<span class="sig">points: Δ = system − baseline; whiskers: 95% CI; hollow: '
                 "no CI; † signatures differ</span>")
    return (f'<figure class="plot wide" id="plot-forest"><figcaption>{caption}</figcaption>'
            f"{svg}</figure>")
