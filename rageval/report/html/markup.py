"""HTML building blocks shared by the report's sections: escaping, number formatting, table
cells, sortable tables, run labels.

Every piece of user text (answers, queries, judge reasoning, names) reaches the page through
:func:`esc`. Sorting and filtering are done by ``assets/report.js``, which reads the ``data-key``,
``data-type``, ``data-v`` and ``data-s`` attributes written here.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

from rageval.report.html.data import ReportRun, as_finite


def esc(value: object) -> str:
    """Escape any value for HTML text and attribute values (quotes included)."""
    return html.escape(str(value), quote=True)


def fmt_number(value: float | None, digits: int = 4) -> str:
    """A number for a table cell; integers (judge scores, counts) without decimals."""
    if value is None or not math.isfinite(value):
        return "—"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.1f}"


def swatch(color: str) -> str:
    """A small square in a run's color."""
    return f'<span class="swatch" style="background:{esc(color)}"></span>'


def run_label(run: ReportRun) -> str:
    """The run's name after its color swatch."""
    return f"{swatch(run.color)}{esc(run.name)}"


def clip(inner_html: str) -> str:
    """Long text shown on three lines; a click (or Enter) shows all of it."""
    return f'<div class="clip" title="click to expand">{inner_html}</div>'


def th(label_html: str, *, key: str | None = None, kind: str | None = None,
       numeric: bool = False, title: str | None = None) -> str:
    """A header cell; ``key`` and ``kind`` (``text`` or ``num``) make its column sortable."""
    attrs = []
    if key is not None:
        attrs.append(f'data-key="{esc(key)}"')
    if kind is not None:
        attrs.append(f'data-type="{kind}"')
    if numeric:
        attrs.append('class="num"')
    if title:
        attrs.append(f'title="{esc(title)}"')
    return f"<th {' '.join(attrs)}>{label_html}</th>" if attrs else f"<th>{label_html}</th>"


def table(table_id: str, head: Iterable[str], rows: Iterable[str], *, sortable: bool = True,
          tall: bool = False) -> str:
    """A table in its scrolling wrapper; ``tall`` for the long per-record table."""
    classes = ' class="sortable"' if sortable else ""
    wrap = "table-wrap tall" if tall else "table-wrap"
    return (f'<div class="{wrap}"><table id="{esc(table_id)}"{classes}>'
            f"<thead><tr>{''.join(head)}</tr></thead>"
            f"<tbody>\n{''.join(rows)}</tbody></table></div>")


def num_cell(value: float | None, *, extra_class: str = "", title: str | None = None,
             style: str = "") -> str:
    """A numeric cell: the formatted number, and its exact value in ``data-v`` for sorting."""
    number = as_finite(value)
    classes = "num" + (" null" if number is None else "") + (f" {extra_class}" if extra_class
                                                             else "")
    data = "" if number is None else repr(number)
    title_attr = f' title="{esc(title)}"' if title else ""
    style_attr = f' style="{style}"' if style else ""
    return (f'<td class="{classes}" data-v="{data}"{title_attr}{style_attr}>'
            f"{esc(fmt_number(number))}</td>")


def ci_text(ci: Sequence[float | None] | None) -> str:
    """A confidence interval as ``[low, high]``, or a dash."""
    if ci is None or len(ci) != 2:
        return "—"
    return f"[{esc(fmt_number(as_finite(ci[0])))}, {esc(fmt_number(as_finite(ci[1])))}]"
