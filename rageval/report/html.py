"""The HTML report (``rageval report DIR [DIR ...] -o report.html``): presentation only.

One self-contained file that opens offline: inline CSS and JavaScript (no scripts, styles or fonts
to fetch), plots drawn with matplotlib and inlined as SVG with text as paths. The page holds:

* the summary of each run (value, 95% CI, n, unscored, signature: principle 2);
* the score distribution of each headline metric, all runs in one plot;
* for two or more runs, the comparison table and a forest plot of the deltas with their CIs;
* a per-record table (query, answer, scores, judge reasoning, unscored reasons) that sorts by
  clicking a header and filters with a search box;
* each run's manifest.

Every piece of user text (answers, queries, judge reasoning, names, the manifest) is HTML-escaped,
and a Content-Security-Policy allows only the page's own script (by its hash) to run, so a hostile
record cannot inject script even if escaping were ever missed.

matplotlib is optional (the ``report`` extra): it is imported on first use, and only through
:class:`matplotlib.figure.Figure` (never pyplot), so building a report does not change the
caller's matplotlib backend or global state.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from rageval.core.errors import MissingDependencyError, UsageError
from rageval.core.files import atomic_write
from rageval.core.records import Record, load_records
from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.core.version import __version__

__all__ = ["build_report", "load_run_records", "write_report"]

# One color per run, used in plots and next to run names in tables (matplotlib's tab10).
_RUN_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_UP, _DOWN, _NEUTRAL = "#0969da", "#bc4c00", "#8c959f"

# Style of every plot. Text is drawn as paths so the SVG needs no font; math parsing is off so a
# "$" in a run or metric name is drawn as itself instead of being read as TeX.
_PLOT_RC: dict[str, Any] = {
    "svg.fonttype": "path",
    "text.parse_math": False,
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.labelsize": 8.5,
    "axes.edgecolor": "#8c959f",
    "axes.labelcolor": "#1f2328",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": "#59636e",
    "ytick.color": "#59636e",
    "xtick.labelcolor": "#1f2328",
    "ytick.labelcolor": "#1f2328",
    "grid.color": "#d1d9e0",
    "grid.linewidth": 0.6,
    "legend.fontsize": 8,
    "figure.facecolor": "white",
}
_PLOT_WIDTH_IN = 6.4
_LABEL_CHARS = 32  # run names longer than this are shortened in plots (tables show them whole)
_MAX_BAR_SPAN = 20  # integer scores spanning at most this many values are drawn as bar counts
_JUDGE_SCALE = (1, 5)  # the rubric scale (DESIGN: judge scores stay on the rubric's 1-5)


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per run
class _Run:
    """One run as the report shows it."""

    name: str
    results: Results
    color: str
    records: Mapping[str, Record] | None  # the scored inputs by id, when they could be read
    by_id: Mapping[str, RecordResult]


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def build_report(
    runs: Sequence[tuple[str, Results]],
    comparison_rows: list[dict[str, Any]] | None = None,
    *,
    records_by_run: dict[str, list[Record]] | None = None,
    title: str | None = None,
) -> str:
    """The report as one HTML document.

    ``runs`` pairs a display name (the run directory as the user gave it) with its results;
    ``comparison_rows`` are the rows of :mod:`rageval.compare.runs` (one per system,
    metric) for two or more runs; ``records_by_run`` maps a run name to the records it scored (see
    :func:`load_run_records`), so the per-record table can show queries and answers. Raises
    :class:`~rageval.core.errors.MissingDependencyError` when matplotlib is missing.
    """
    prepared = _prepare_runs(runs, records_by_run or {})
    rows = list(comparison_rows or [])
    heading = title or _default_title(prepared)
    metrics = _headline_metrics(prepared)
    script = _asset("report.js")
    sections = [
        _summary_section(prepared),
        _distribution_section(prepared, metrics),
        _comparison_section(prepared, rows) if rows else "",
        _records_section(prepared, metrics),
        _manifest_section(prepared),
    ]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{_csp(script)}">',
        f'<meta name="generator" content="rageval {_e(__version__)}">',
        f"<title>{_e(heading)}</title>",
        f"<style>\n{_asset('report.css')}</style>",
        "</head>",
        "<body>",
        _header(prepared, heading, has_comparison=bool(rows)),
        "<main>",
        *[section for section in sections if section],
        "</main>",
        f'<footer>Generated by rageval {_e(__version__)}. This file is self-contained: it opens '
        "offline and loads nothing from the network.</footer>",
        f"<script>{script}</script>",
        "</body>",
        "</html>",
        "",
    ])


def write_report(path: str | os.PathLike[str], html_text: str) -> Path:
    """Write the report to ``path`` through a temporary file and a rename, so that an
    interrupted run never leaves a half-written page where a good one was."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(target, html_text)


def load_run_records(results: Results) -> list[Record] | None:
    """The records a run scored, read again from the file its manifest names.

    Returns None when the run was scored from memory or the file is no longer there (the report
    then shows ids, scores and judge reasoning without queries and answers). A file that exists
    but no longer loads raises :class:`~rageval.core.errors.InputError`, naming the file and line.
    """
    info = results.manifest.get("records")
    source = info.get("source") if isinstance(info, Mapping) else None
    if not isinstance(source, str) or source == "<memory>" or not Path(source).is_file():
        return None
    return load_records(source)


# --------------------------------------------------------------------------------------------
# Preparation
# --------------------------------------------------------------------------------------------


def _prepare_runs(
    runs: Sequence[tuple[str, Results]], records_by_run: Mapping[str, list[Record]]
) -> list[_Run]:
    if not runs:
        raise UsageError("a report needs at least one run")
    names = [name for name, _ in runs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise UsageError(f"run names must be distinct; repeated: {', '.join(duplicates)}")
    unknown = sorted(set(records_by_run) - set(names))
    if unknown:
        raise UsageError(f"records given for unknown runs: {', '.join(unknown)}")
    prepared = []
    for index, (name, results) in enumerate(runs):
        records = records_by_run.get(name)
        prepared.append(_Run(
            name=name,
            results=results,
            color=_RUN_COLORS[index % len(_RUN_COLORS)],
            records=None if records is None else {record.id: record for record in records},
            by_id={result.id: result for result in results.records},
        ))
    return prepared


def _default_title(runs: list[_Run]) -> str:
    if len(runs) == 1:
        return f"rageval report: {runs[0].name}"
    return f"rageval report: {len(runs)} runs"


def _headline_names(results: Results) -> list[str]:
    """The metrics the user asked for (the manifest lists them); components such as
    ``rouge1.precision`` only when nothing says which names are headlines."""
    requested = results.manifest.get("metrics")
    if isinstance(requested, list):
        names = [name for name in requested if isinstance(name, str) and name in results.summary]
        if names:
            return names
    return [name for name, item in results.summary.items()
            if item.in_table and name.rpartition(".")[0] not in results.summary]


def _headline_metrics(runs: list[_Run]) -> list[str]:
    """Headline metrics of all runs, in order of first appearance."""
    return list(dict.fromkeys(name for run in runs for name in _headline_names(run.results)))


# --------------------------------------------------------------------------------------------
# Small HTML helpers
# --------------------------------------------------------------------------------------------


def _e(value: object) -> str:
    """Escape any value for HTML text and attribute values (quotes included)."""
    return html.escape(str(value), quote=True)


def _asset(name: str) -> str:
    return resources.files("rageval.report").joinpath("assets", name).read_text(encoding="utf-8")


def _csp(script: str) -> str:
    """A policy that forbids every fetch and every script but ours (allowed by its hash).

    Styles may be inline (the page and matplotlib's SVGs use style attributes); images only
    ``data:`` URLs. A load the page should not make shows up as a console error in a browser.
    """
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def _fmt(value: float | None, digits: int = 4) -> str:
    """A number for a table cell; integers (judge scores, counts) without decimals."""
    if value is None or not math.isfinite(value):
        return "—"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.1f}"


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _swatch(color: str) -> str:
    return f'<span class="swatch" style="background:{_e(color)}"></span>'


def _run_label(run: _Run) -> str:
    return f"{_swatch(run.color)}{_e(run.name)}"


def _clip(inner_html: str) -> str:
    """Long text shown on three lines; a click (or Enter) shows all of it."""
    return f'<div class="clip" title="click to expand">{inner_html}</div>'


def _th(label_html: str, *, key: str | None = None, kind: str | None = None,
        numeric: bool = False, title: str | None = None) -> str:
    attrs = []
    if key is not None:
        attrs.append(f'data-key="{_e(key)}"')
    if kind is not None:
        attrs.append(f'data-type="{kind}"')
    if numeric:
        attrs.append('class="num"')
    if title:
        attrs.append(f'title="{_e(title)}"')
    return f"<th {' '.join(attrs)}>{label_html}</th>" if attrs else f"<th>{label_html}</th>"


def _table(table_id: str, head: Iterable[str], rows: Iterable[str], *, sortable: bool = True,
           tall: bool = False) -> str:
    classes = ' class="sortable"' if sortable else ""
    wrap = "table-wrap tall" if tall else "table-wrap"
    return (f'<div class="{wrap}"><table id="{_e(table_id)}"{classes}>'
            f"<thead><tr>{''.join(head)}</tr></thead>"
            f"<tbody>\n{''.join(rows)}</tbody></table></div>")


# --------------------------------------------------------------------------------------------
# Header and summary
# --------------------------------------------------------------------------------------------


def _header(runs: list[_Run], heading: str, *, has_comparison: bool) -> str:
    parts = []
    for run in runs:
        count = len(run.results.records)
        parts.append(f'<span class="run">{_run_label(run)} '
                     f'<span class="muted">({count} records)</span></span>')
    links = [("summary", "Summary"), ("distributions", "Distributions")]
    if has_comparison:
        links.append(("comparison", "Comparison"))
    links += [("records", "Records"), ("manifest", "Manifest")]
    nav = "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in links)
    return (f"<header><h1>{_e(heading)}</h1><p class=\"runs\">{''.join(parts)}</p>"
            f"<nav>{nav}</nav></header>")


def _summary_section(runs: list[_Run]) -> str:
    blocks = ['<section id="summary"><h2>Summary</h2>',
              '<div class="toolbar"><label><input type="checkbox" id="show-components"> '
              "show components (precision, recall, ...)</label></div>"]
    for index, run in enumerate(runs):
        blocks.append(_run_summary(run, index))
    blocks.append('<p class="note">95% CI: bootstrap percentile interval. '
                  "Hover a signature for its long form.</p></section>")
    return "\n".join(blocks)


def _run_summary(run: _Run, index: int) -> str:
    source = run.results.manifest.get("records", {})
    source_text = source.get("source") if isinstance(source, Mapping) else None
    created = run.results.manifest.get("created")
    facts = [f"{len(run.results.records)} records"]
    if isinstance(source_text, str):
        facts.append(f"from <code>{_e(source_text)}</code>")
    if isinstance(created, str):
        facts.append(f"scored {_e(created)}")
    head = [_th("metric", key="metric", kind="text"), _th("value", key="value", kind="num",
            numeric=True), _th("95% CI", numeric=True), _th("n", key="n", kind="num",
            numeric=True), _th("unscored", key="unscored", kind="num", numeric=True),
            _th("signature")]
    headline = set(_headline_names(run.results))
    rows = [_summary_row(name, item, name in headline)
            for name, item in run.results.summary.items()]
    return (f"<h3>{_run_label(run)}</h3><p class=\"note\">{' · '.join(facts)}</p>"
            + _table(f"summary-{index}", head, rows) + _reasons_list(run.results))


def _summary_row(name: str, item: MetricSummary, headline: bool) -> str:
    classes = ["headline" if headline else "", "" if item.in_table else "component"]
    class_attr = " ".join(c for c in classes if c)
    label = _e(name) + (' <span class="muted">(corpus)</span>' if item.aggregate == "corpus"
                        else "")
    short = item.short_signature or item.signature
    return (f'<tr class="{class_attr}"><td data-s="{_e(name)}">{label}</td>'
            f"{_num_cell(item.value)}"
            f'<td class="num">{_ci_text(item.ci95)}</td>'
            f'<td class="num" data-v="{item.n}">{item.n}</td>'
            f'<td class="num" data-v="{item.unscored}">{item.unscored}</td>'
            f'<td class="sig" title="{_e(item.signature)}">{_e(short)}</td></tr>\n')


def _num_cell(value: float | None, *, extra_class: str = "", title: str | None = None,
              style: str = "") -> str:
    number = _finite(value)
    classes = "num" + (" null" if number is None else "") + (f" {extra_class}" if extra_class
                                                             else "")
    data = "" if number is None else repr(number)
    title_attr = f' title="{_e(title)}"' if title else ""
    style_attr = f' style="{style}"' if style else ""
    return (f'<td class="{classes}" data-v="{data}"{title_attr}{style_attr}>'
            f"{_e(_fmt(number))}</td>")


def _ci_text(ci: Sequence[float | None] | None) -> str:
    if ci is None or len(ci) != 2:
        return "—"
    return f"[{_e(_fmt(_finite(ci[0])))}, {_e(_fmt(_finite(ci[1])))}]"


def _reasons_list(results: Results) -> str:
    """Why records went unscored, once per metric (components share their metric's reasons)."""
    seen: set[str] = set()
    items = []
    for name, item in results.summary.items():
        if item.signature in seen or not item.reasons:
            continue
        seen.add(item.signature)
        for reason, count in item.reasons.items():
            items.append(f"<li><b>{_e(name)}</b>: {count} unscored: {_e(reason)}</li>")
    return f'<ul class="reasons">{"".join(items)}</ul>' if items else ""


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------


def _matplotlib() -> tuple[Any, Any]:
    """matplotlib and its Figure class, or the error naming the extra to install."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError("matplotlib", "report") from None
    return matplotlib, Figure


def _render_svg(draw: Callable[[Any], None], *, height: float, prefix: str, label: str,
                width: float = _PLOT_WIDTH_IN) -> str:
    """Draw on a fresh Figure (no pyplot, so no global backend) and return inline SVG."""
    matplotlib, figure_class = _matplotlib()
    # A per-plot salt makes the SVG ids deterministic (stable output) and distinct per plot.
    with matplotlib.rc_context({**_PLOT_RC, "svg.hashsalt": prefix}):
        figure = figure_class(figsize=(width, height), layout="constrained")
        draw(figure)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return _inline_svg(buffer.getvalue().decode("utf-8"), prefix, label)


_ID_RE = re.compile(r'\bid="([^"]+)"')
_REF_RE = re.compile(r'(href="#|url\(#)([^")]+)')


def _inline_svg(svg: str, prefix: str, label: str) -> str:
    """Make matplotlib's standalone SVG fit inside HTML.

    Drops the XML prolog, doctype, metadata and comments (comments repeat the plot's text);
    lets CSS size the plot (the viewBox keeps its aspect ratio); and prefixes every id, because
    each SVG reuses ids such as ``DejaVuSans-30`` for glyphs and ids must be unique in a page.
    """
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.S)
    ids = set(_ID_RE.findall(svg))
    svg = _ID_RE.sub(lambda m: f'id="{prefix}{m[1]}"', svg)
    svg = _REF_RE.sub(lambda m: m[1] + (prefix + m[2] if m[2] in ids else m[2]), svg)
    root_end = svg.index(">")
    root = re.sub(r'\s(width|height)="[^"]*"', "", svg[:root_end])
    root += f' role="img" aria-label="{_e(label)}"'
    return root + svg[root_end:]


def _short(name: str) -> str:
    return name if len(name) <= _LABEL_CHARS else "…" + name[-(_LABEL_CHARS - 1):]


def _scores(run: _Run, metric: str) -> np.ndarray:
    values = [_finite(result.scores.get(metric)) for result in run.results.records]
    return np.array([v for v in values if v is not None], dtype=float)


def _distribution_section(runs: list[_Run], metrics: list[str]) -> str:
    figures = []
    for index, metric in enumerate(metrics):
        series = [(run, _scores(run, metric)) for run in runs if metric in run.results.summary]
        figures.append(_distribution_figure(metric, series, f"dist{index}-"))
    note = ('<p class="note">One plot per headline metric. Each dot is a record; boxes show the '
            "quartiles, diamonds the mean. Integer scores (judge rubrics) are shown as counts per "
            "score. Unscored records are not drawn: their count is in each label.</p>")
    body = "\n".join(figures) or '<p class="note">No metrics.</p>'
    return (f'<section id="distributions"><h2>Score distributions</h2>{note}'
            f'<div class="plots">{body}</div></section>')


def _distribution_figure(metric: str, series: list[tuple[_Run, np.ndarray]], prefix: str) -> str:
    judge = metric.startswith("judge:")
    if _as_bars(series):
        height = 2.4 + 0.2 * math.ceil(len(series) / 3)
        svg = _render_svg(lambda fig: _draw_bars(fig, metric, series, judge), height=height,
                          prefix=prefix, label=f"counts of {metric} scores")
    else:
        height = 1.0 + 0.55 * len(series)
        svg = _render_svg(lambda fig: _draw_strips(fig, metric, series), height=height,
                          prefix=prefix, label=f"distribution of {metric} scores")
    summary = series[0][0].results.summary[metric] if series else None
    signature = "" if summary is None else summary.signature
    short = "" if summary is None else (summary.short_signature or summary.signature)
    return (f'<figure class="plot" id="plot-{_e(prefix.rstrip("-"))}" data-metric="{_e(metric)}">'
            f"<figcaption><b>{_e(metric)}</b>"
            f'<span class="sig" title="{_e(signature)}">{_e(short)}</span></figcaption>'
            f"{svg}</figure>")


def _as_bars(series: list[tuple[_Run, np.ndarray]]) -> bool:
    """Counts per value suit scores on a small integer scale (a 1-5 rubric, 0/1 success)."""
    values = [v for _, scores in series for v in scores]
    if not values or not all(float(v).is_integer() for v in values):
        return False
    return max(values) - min(values) <= _MAX_BAR_SPAN


def _series_label(run: _Run, metric: str, count: int) -> str:
    unscored = run.results.summary[metric].unscored
    extra = f", {unscored} unscored" if unscored else ""
    return f"{_short(run.name)}\n(n={count}{extra})"


def _draw_strips(figure: Any, metric: str, series: list[tuple[_Run, np.ndarray]]) -> None:
    """A box plot with every record as a jittered dot, one row per run (first run on top)."""
    axes = figure.add_subplot()
    rng = np.random.default_rng(0)  # fixed jitter: the same data gives the same picture
    positions = list(range(len(series), 0, -1))
    for position, (run, values) in zip(positions, series, strict=True):
        if not values.size:
            continue
        axes.boxplot([values], positions=[position], widths=0.55, showfliers=False,
                     patch_artist=True, manage_ticks=False, **_horizontal(axes),
                     boxprops={"facecolor": run.color + "22", "edgecolor": run.color},
                     medianprops={"color": run.color, "linewidth": 1.6},
                     whiskerprops={"color": run.color}, capprops={"color": run.color})
        jitter = rng.uniform(-0.17, 0.17, values.size)
        axes.scatter(values, position + jitter, s=14, color=run.color, alpha=0.8,
                     linewidths=0, zorder=3)
        axes.scatter([values.mean()], [position], marker="D", s=30, color="white",
                     edgecolors="#1f2328", linewidths=1.0, zorder=4)
    axes.set_yticks(positions, [_series_label(run, metric, values.size)
                                for run, values in series])
    axes.set_ylim(0.4, len(series) + 0.6)
    axes.set_xlabel(metric)
    axes.grid(axis="x")
    axes.set_axisbelow(True)
    axes.spines["left"].set_visible(False)
    axes.tick_params(axis="y", length=0)
    if not any(values.size for _, values in series):
        axes.text(0.5, 0.5, "no scored records", transform=axes.transAxes, ha="center",
                  va="center", color="#59636e")
        axes.set_xticks([])


def _horizontal(axes: Any) -> dict[str, Any]:
    """``orientation=`` since matplotlib 3.10 (which deprecates ``vert=``); ``vert`` before."""
    import inspect

    if "orientation" in inspect.signature(axes.boxplot).parameters:
        return {"orientation": "horizontal"}
    return {"vert": False}


def _draw_bars(figure: Any, metric: str, series: list[tuple[_Run, np.ndarray]],
               judge: bool) -> None:
    """Counts per integer score, runs side by side; a judge's axis spans its whole rubric."""
    from matplotlib.ticker import MaxNLocator

    axes = figure.add_subplot()
    values = np.concatenate([scores for _, scores in series])
    low, high = int(values.min()), int(values.max())
    if judge:
        low, high = min(low, _JUDGE_SCALE[0]), max(high, _JUDGE_SCALE[1])
    xs = np.arange(low, high + 1)
    width = 0.8 / len(series)
    for index, (run, scores) in enumerate(series):
        counts = [int(np.count_nonzero(scores == x)) for x in xs]
        offset = (index - (len(series) - 1) / 2) * width
        axes.bar(xs + offset, counts, width=width * 0.92, color=run.color,
                 label=_series_label(run, metric, scores.size).replace("\n", " "))
    axes.set_xticks(xs)
    axes.set_xlabel(f"{metric} score")
    axes.set_ylabel("records")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.grid(axis="y")
    axes.set_axisbelow(True)
    # The legend also carries each run's unscored count, so it is shown for a single run too.
    figure.legend(loc="outside upper center", ncols=min(len(series), 3), frameon=False)


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------


def _significance(row: Mapping[str, Any]) -> float | None:
    """The p-value to judge a row by: adjusted for multiple comparisons when available."""
    adjusted = _finite(row.get("p_adjusted"))
    return adjusted if adjusted is not None else _finite(row.get("p_value"))


def _stars(p: float | None) -> str:
    if p is None:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def _ci_excludes_zero(row: Mapping[str, Any]) -> int:
    """+1 or -1 when the 95% CI lies wholly above or below zero, else 0."""
    ci = row.get("ci95")
    if not isinstance(ci, Sequence) or len(ci) != 2:
        return 0
    low, high = _finite(ci[0]), _finite(ci[1])
    if low is None or high is None:
        return 0
    return 1 if low > 0 else -1 if high < 0 else 0


def _mismatch_text(value: Any) -> str | None:
    """A description of a signature mismatch, or None when the signatures agree."""
    if not value:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return "the runs' signatures for this metric differ: the delta may not be meaningful"


def _headline_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if any("headline" in row for row in rows):
        return [row for row in rows if row.get("headline")]
    return rows


def _comparison_section(runs: list[_Run], rows: list[dict[str, Any]]) -> str:
    has_headline = any("headline" in row for row in rows)
    head = [_th("metric", key="metric", kind="text"), _th("baseline", key="baseline", kind="text"),
            _th("system", key="system", kind="text"),
            _th("baseline value", key="baseline_value", kind="num", numeric=True),
            _th("system value", key="system_value", kind="num", numeric=True),
            _th("Δ", key="delta", kind="num", numeric=True, title="system − baseline"),
            _th("95% CI of Δ", numeric=True),
            _th("p", key="p_value", kind="num", numeric=True),
            _th("p (adj.)", key="p_adjusted", kind="num", numeric=True,
                title="adjusted for multiple comparisons"),
            _th("W / T / L", title="records where the system wins, ties, loses"),
            _th("n", key="n", kind="num", numeric=True), _th("flags")]
    colors = {run.name: run.color for run in runs}
    body = [_comparison_row(row, colors, has_headline) for row in rows]
    forest = _forest_figure(runs, _headline_rows(rows))
    note = ('<p class="note">Δ = system − baseline on the records both runs scored. '
            "Significance from the adjusted p-value where given: * p &lt; 0.05, ** p &lt; 0.01, "
            "*** p &lt; 0.001. Δ is coloured when its 95% CI excludes zero. "
            '<span class="flag">⚠ signature</span> marks metrics whose configuration differs '
            "between the runs.</p>")
    return ('<section id="comparison"><h2>Comparison</h2>'
            + _table("comparison-table", head, body) + note + forest + "</section>")


def _comparison_row(row: Mapping[str, Any], colors: Mapping[str, str], has_headline: bool) -> str:
    direction = _ci_excludes_zero(row)
    delta_class = {1: "up", -1: "down"}.get(direction, "")
    stars = _stars(_significance(row))
    mismatch = _mismatch_text(row.get("signature_mismatch"))
    flags = (f'<span class="flag" title="{_e(mismatch)}">⚠ signature</span>' if mismatch
             else "")
    wins, ties, losses = (row.get(k) for k in ("wins", "ties", "losses"))
    wtl = " / ".join("—" if v is None else _e(v) for v in (wins, ties, losses))
    row_class = ("headline" if row.get("headline") else "component") if has_headline else ""
    cells = [
        f'<td data-s="{_e(row.get("metric", ""))}">{_e(row.get("metric", ""))}</td>',
        _name_cell(row.get("baseline"), colors),
        _name_cell(row.get("system"), colors),
        _num_cell(row.get("baseline_value")),
        _num_cell(row.get("system_value")),
        _num_cell(row.get("delta"), extra_class=delta_class),
        f'<td class="num">{_ci_text(_ci_pair(row.get("ci95")))}</td>',
        _num_cell(row.get("p_value")),
        _p_cell(row.get("p_adjusted"), stars),
        f'<td class="num">{wtl}</td>',
        _num_cell(row.get("n")),
        f"<td>{flags}</td>",
    ]
    class_attr = f' class="{row_class}"' if row_class else ""
    return f"<tr{class_attr}>{''.join(cells)}</tr>\n"


def _ci_pair(value: Any) -> tuple[float | None, float | None] | None:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        return None
    return _finite(value[0]), _finite(value[1])


def _p_cell(value: Any, stars: str) -> str:
    number = _finite(value)
    data = "" if number is None else repr(number)
    mark = f' <span class="stars">{stars}</span>' if stars else ""
    return f'<td class="num" data-v="{data}">{_e(_fmt_p(number))}{mark}</td>'


def _fmt_p(value: float | None) -> str:
    if value is None:
        return "—"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _name_cell(name: Any, colors: Mapping[str, str]) -> str:
    text = "" if name is None else str(name)
    swatch = _swatch(colors[text]) if text in colors else ""
    return f'<td data-s="{_e(text)}">{swatch}{_e(text)}</td>'


def _forest_figure(runs: list[_Run], rows: list[dict[str, Any]]) -> str:
    """One panel per metric (metrics have different scales), one row per system."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if _finite(row.get("delta")) is not None:
            groups.setdefault(str(row.get("metric", "")), []).append(row)
    if not groups:
        return '<p class="note">No deltas to plot.</p>'
    baselines = {str(row.get("baseline")) for group in groups.values() for row in group}
    height = 0.45 + sum(0.5 + 0.26 * len(group) for group in groups.values())
    svg = _render_svg(lambda fig: _draw_forest(fig, groups, len(baselines) > 1),
                      height=height, width=_PLOT_WIDTH_IN * 1.25, prefix="forest-",
                      label="forest plot of deltas with 95% CIs")
    one = next(iter(baselines)) if len(baselines) == 1 else None
    caption = ("<b>Δ against the baseline</b>"
               + (f" {_e(one)}" if one is not None else "")
               + '<span class="sig">points: Δ = system − baseline; whiskers: 95% CI; hollow: '
                 "no CI; † signatures differ</span>")
    return (f'<figure class="plot wide" id="plot-forest"><figcaption>{caption}</figcaption>'
            f"{svg}</figure>")


def _draw_forest(figure: Any, groups: Mapping[str, list[dict[str, Any]]],
                 name_baseline: bool) -> None:
    heights = [len(group) + 1.6 for group in groups.values()]
    axes_grid = figure.subplots(len(groups), 1, squeeze=False,
                                gridspec_kw={"height_ratios": heights})
    for axes, (metric, group) in zip(axes_grid[:, 0], groups.items(), strict=True):
        _draw_forest_panel(axes, metric, group, name_baseline)
    axes_grid[-1, 0].set_xlabel("Δ = system − baseline (95% CI)")


def _draw_forest_panel(axes: Any, metric: str, group: list[dict[str, Any]],
                       name_baseline: bool) -> None:
    ys = list(range(len(group) - 1, -1, -1))
    labels = []
    extent = [0.0]
    for y, row in zip(ys, group, strict=True):
        delta = float(row["delta"])
        color = {1: _UP, -1: _DOWN}.get(_ci_excludes_zero(row), _NEUTRAL)
        ci = _ci_pair(row.get("ci95"))
        if ci is not None and ci[0] is not None and ci[1] is not None:
            low, high = ci
            axes.errorbar([delta], [y], xerr=[[max(delta - low, 0.0)], [max(high - delta, 0.0)]],
                          fmt="o", color=color, ecolor=color, elinewidth=1.6, capsize=3.5,
                          markersize=5.5)
            extent += [low, high]
        else:
            axes.plot([delta], [y], "o", color=color, markerfacecolor="white", markersize=5.5)
        extent.append(delta)
        label = _short(str(row.get("system", "")))
        if name_baseline:
            label += f" vs {_short(str(row.get('baseline', '')))}"
        if _mismatch_text(row.get("signature_mismatch")):
            label += " †"
        labels.append(label)
    axes.axvline(0.0, color="#59636e", linewidth=0.9, linestyle="--", zorder=0)
    span = (max(extent) - min(extent)) or 1.0
    axes.set_xlim(min(extent) - 0.08 * span, max(extent) + 0.08 * span)
    axes.set_yticks(ys, labels)
    axes.set_ylim(-0.8, len(group) - 0.2)
    axes.set_title(metric, loc="left", fontweight="bold")
    axes.grid(axis="x")
    axes.set_axisbelow(True)
    axes.spines["left"].set_visible(False)
    axes.tick_params(axis="y", length=0)


# --------------------------------------------------------------------------------------------
# Per-record table
# --------------------------------------------------------------------------------------------


def _records_section(runs: list[_Run], metrics: list[str]) -> str:
    ids = list(dict.fromkeys(result.id for run in runs for result in run.results.records))
    text_columns = _text_columns(runs)
    score_columns = [(run, metric) for metric in metrics for run in runs
                     if metric in run.results.summary]
    ranges = {column: _column_range(*column) for column in score_columns}
    has_reasoning = any(_reasonings(run, result) for run in runs for result in run.results)
    has_errors = any(result.errors for run in runs for result in run.results)
    several = len(runs) > 1

    head = [_th("id", key="id", kind="text")]
    head += [_th(label, key=key, kind="text") for key, label, _ in text_columns]
    for run, metric in score_columns:
        label = _e(metric) + (f'<span class="sub">{_run_label(run)}</span>' if several else "")
        key = f"{run.name}:{metric}" if several else metric
        head.append(_th(label, key=key, kind="num", numeric=True,
                        title=run.results.summary[metric].signature))
    if has_reasoning:
        head.append(_th("judge reasoning", key="reasoning", kind="text"))
    if has_errors:
        head.append(_th("unscored / errors", key="errors", kind="text"))

    rows = []
    for record_id in ids:
        cells = [f'<td class="id">{_e(record_id)}</td>']
        cells += [_text_cell(getter(record_id)) for _, _, getter in text_columns]
        for run, metric in score_columns:
            cells.append(_score_cell(run, record_id, metric, ranges[(run, metric)]))
        if has_reasoning:
            cells.append(_reasoning_cell(runs, record_id))
        if has_errors:
            cells.append(_errors_cell(runs, record_id))
        rows.append(f"<tr>{''.join(cells)}</tr>\n")

    missing = [run.name for run in runs if run.records is None]
    note = ""
    if missing and text_columns:
        note = ('<p class="note">Queries and answers are missing for '
                + ", ".join(_e(name) for name in missing)
                + ": its records file could not be found.</p>")
    elif missing:
        note = ('<p class="note">The records files could not be found, so queries and answers '
                "are not shown: ids, scores and judge reasoning only.</p>")
    toolbar = ('<div class="toolbar"><input type="search" id="records-filter" '
               'placeholder="Filter records (id, text, reasoning, …)" aria-label="filter records">'
               f'<span id="records-count" class="muted">{len(ids)} records</span>'
               '<span class="muted">Click a header to sort (unscored last); click a long text '
               "to expand it.</span></div>")
    return (f'<section id="records"><h2>Records</h2>{note}{toolbar}'
            + _table("records-table", head, rows, tall=True) + "</section>")


_TextGetter = Callable[[str], str | None]


def _text_columns(runs: list[_Run]) -> list[tuple[str, str, _TextGetter]]:
    """Query, answer and reference columns, for the runs whose records could be read.

    Query and reference come from the first run that has the record (runs compared on the same
    questions share them); answers get one column per run when any of them differ.
    """
    with_records = [run for run in runs if run.records is not None]
    if not with_records:
        return []

    def first(field: Callable[[Record], str | None]) -> _TextGetter:
        def get(record_id: str) -> str | None:
            for run in with_records:
                record = run.records.get(record_id) if run.records is not None else None
                if record is not None and field(record):
                    return field(record)
            return None
        return get

    def answer_of(run: _Run) -> _TextGetter:
        def get(record_id: str) -> str | None:
            record = run.records.get(record_id) if run.records is not None else None
            return None if record is None else record.answer
        return get

    columns: list[tuple[str, str, _TextGetter]] = [
        ("query", "query", first(lambda r: r.query))]
    if _answers_differ(with_records):
        columns += [(f"answer:{run.name}", f'answer<span class="sub">{_run_label(run)}</span>',
                     answer_of(run)) for run in with_records]
    else:
        columns.append(("answer", "answer", first(lambda r: r.answer)))
    if any(record.references for run in with_records for record in _values(run.records)):
        columns.append(("reference", "reference", first(_joined_references)))
    return columns


def _values(records: Mapping[str, Record] | None) -> Iterable[Record]:
    return () if records is None else records.values()


def _joined_references(record: Record) -> str | None:
    return "\n—\n".join(record.references) if record.references else None


def _answers_differ(runs: list[_Run]) -> bool:
    if len(runs) < 2:
        return False
    first = runs[0].records or {}
    return any(first.get(record_id) is None or first[record_id].answer != record.answer
               for run in runs[1:] for record_id, record in _items(run.records))


def _items(records: Mapping[str, Record] | None) -> Iterable[tuple[str, Record]]:
    return () if records is None else records.items()


def _text_cell(text: str | None) -> str:
    if not text:
        return '<td class="null" data-s="">—</td>'
    return f"<td>{_clip(_e(text))}</td>"


def _column_range(run: _Run, metric: str) -> tuple[float, float]:
    scores = _scores(run, metric)
    if not scores.size:
        return (0.0, 1.0)
    low, high = float(scores.min()), float(scores.max())
    if _as_bars([(run, scores)]) and metric.startswith("judge:"):
        low, high = min(low, _JUDGE_SCALE[0]), max(high, _JUDGE_SCALE[1])
    return (min(low, 0.0), high) if low >= 0 else (low, high)


def _score_cell(run: _Run, record_id: str, metric: str, bounds: tuple[float, float]) -> str:
    result = run.by_id.get(record_id)
    if result is None:
        return '<td class="num null" data-v="" title="not in this run">·</td>'
    value = _finite(result.scores.get(metric))
    if value is None:
        reason = result.errors.get(metric) or "unscored"
        return f'<td class="num null" data-v="" title="{_e(reason)}">—</td>'
    low, high = bounds
    share = 0.0 if high <= low else min(max((value - low) / (high - low), 0.0), 1.0)
    return _num_cell(value, extra_class="score", style=f"--p:{share:.3f}")


def _reasonings(run: _Run, result: RecordResult) -> list[tuple[str, str]]:
    """(metric, reasoning) for each judge reply with reasoning in this record's details."""
    out = []
    for metric, detail in result.details.items():
        if isinstance(detail, Mapping) and isinstance(detail.get("reasoning"), str):
            out.append((metric, detail["reasoning"]))
    return out


def _reasoning_cell(runs: list[_Run], record_id: str) -> str:
    parts = []
    for run in runs:
        result = run.by_id.get(record_id)
        if result is None:
            continue
        for metric, reasoning in _reasonings(run, result):
            score = _fmt(_finite(result.scores.get(metric)))
            who = f" · {_e(run.name)}" if len(runs) > 1 else ""
            parts.append(f'<div class="reason"><b>{_e(metric)}</b>{who} '
                         f'<span class="muted">(score {_e(score)})</span>: {_e(reasoning)}</div>')
    if not parts:
        return '<td class="null" data-s="">—</td>'
    return f"<td>{_clip(''.join(parts))}</td>"


def _errors_cell(runs: list[_Run], record_id: str) -> str:
    parts = []
    for run in runs:
        result = run.by_id.get(record_id)
        if result is None:
            continue
        who = f" · {_e(run.name)}" if len(runs) > 1 else ""
        parts += [f'<div class="error"><b>{_e(metric)}</b>{who}: {_e(reason)}</div>'
                  for metric, reason in result.errors.items()]
    if not parts:
        return '<td data-s=""></td>'
    return f"<td>{_clip(''.join(parts))}</td>"


# --------------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------------


def _manifest_section(runs: list[_Run]) -> str:
    blocks = ['<section id="manifest"><h2>Manifest</h2>']
    for index, run in enumerate(runs):
        text = json.dumps(run.results.manifest, indent=2, ensure_ascii=False, default=str)
        opened = " open" if index == 0 else ""
        blocks.append(f'<details class="manifest"{opened}><summary>{_run_label(run)}</summary>'
                      f'<pre class="manifest" id="manifest-{index}">{_e(text)}</pre></details>')
    blocks.append("</section>")
    return "\n".join(blocks)
