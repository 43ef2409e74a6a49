"""The report's plots: drawn with matplotlib, inlined in the page as SVG.

matplotlib is optional (the ``report`` extra): it is imported on first use, and only through
:class:`matplotlib.figure.Figure` (never pyplot), so building a report does not change the
caller's matplotlib backend or global state. :func:`render_svg` gives each ``draw_*`` function a
fresh figure and returns the SVG ready to sit inside HTML: text drawn as paths (no font to
fetch), ids prefixed so that several plots can share one page.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rageval.core.errors import MissingDependencyError
from rageval.core.outputs.text import visible
from rageval.core.results.counts import RunCounts, count_of
from rageval.core.scale import Scale, scale_text
from rageval.report.html.data import (
    ReportRun,
    ci_excludes_zero,
    ci_pair,
    mismatch_text,
    value_span,
)
from rageval.report.html.markup import esc

# Forest-plot colors of a delta whose CI lies wholly above zero, wholly below, or neither.
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
PLOT_WIDTH_IN = 6.4
_LABEL_CHARS = 32  # run names longer than this are shortened in plots (tables show them whole)


def _matplotlib() -> tuple[Any, Any]:
    """matplotlib and its Figure class, or the error naming the extra to install."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError("matplotlib", "report") from None
    return matplotlib, Figure


def render_svg(draw: Callable[[Any], None], *, height: float, prefix: str, label: str,
               width: float = PLOT_WIDTH_IN) -> str:
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
    root += f' role="img" aria-label="{esc(label)}"'
    return root + svg[root_end:]


def _short(name: str) -> str:
    """A name as a plot shows it: its control characters shown escaped (no glyph draws them),
    shortened from the left to :data:`_LABEL_CHARS`."""
    name = visible(name)
    return name if len(name) <= _LABEL_CHARS else "…" + name[-(_LABEL_CHARS - 1):]


def _units(series: list[tuple[ReportRun, np.ndarray]]) -> str:
    """What the plotted values count, plural: ``records``, ``conversations`` (the summary's
    ``n``), or both where the runs differ."""
    nouns = dict.fromkeys(RunCounts.of(run.results).unit + "s" for run, _ in series)
    return " or ".join(nouns) or "records"


def _series_label(run: ReportRun, metric: str, count: int) -> str:
    """The run's name, and what its summary counts: ``(n=3 conversations, 2 unscored)``."""
    unscored = run.results.summary[metric].unscored
    extra = f", {unscored} unscored" if unscored else ""
    noun = RunCounts.of(run.results).unit
    return f"{_short(run.name)}\n(n={count_of(count, noun)}{extra})"


def draw_strips(figure: Any, metric: str, series: list[tuple[ReportRun, np.ndarray]],
                scale: Scale | None = None) -> None:
    """A box plot with every unit (a record, or a conversation) as a jittered dot, one row per
    run (first run on top), along the metric's scale where it is bounded."""
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
    span = value_span(scale, [float(v) for _, values in series for v in values])
    if span is not None:
        margin = 0.03 * (span[1] - span[0])
        axes.set_xlim(span[0] - margin, span[1] + margin)
    shown = visible(metric)
    axes.set_xlabel(f"{shown} (scale {scale_text(scale)})" if scale is not None else shown)
    axes.grid(axis="x")
    axes.set_axisbelow(True)
    axes.spines["left"].set_visible(False)
    axes.tick_params(axis="y", length=0)
    if not any(values.size for _, values in series):
        axes.text(0.5, 0.5, f"no scored {_units(series)}", transform=axes.transAxes, ha="center",
                  va="center", color="#59636e")
        axes.set_xticks([])


def _horizontal(axes: Any) -> dict[str, Any]:
    """``orientation=`` since matplotlib 3.10 (which deprecates ``vert=``); ``vert`` before."""
    import inspect

    if "orientation" in inspect.signature(axes.boxplot).parameters:
        return {"orientation": "horizontal"}
    return {"vert": False}


def draw_bars(figure: Any, metric: str, series: list[tuple[ReportRun, np.ndarray]],
              scale: Scale | None = None) -> None:
    """Counts per integer score, runs side by side; the axis spans the metric's whole scale
    (a rubric's 1-5) where it is bounded and small."""
    from matplotlib.ticker import MaxNLocator

    axes = figure.add_subplot()
    values = np.concatenate([scores for _, scores in series])
    low, high = int(values.min()), int(values.max())
    span = value_span(scale, [float(v) for v in values])
    if span is not None and span[1] - span[0] <= 20 and all(float(e).is_integer() for e in span):
        low, high = int(span[0]), int(span[1])
    xs = np.arange(low, high + 1)
    width = 0.8 / len(series)
    for index, (run, scores) in enumerate(series):
        counts = [int(np.count_nonzero(scores == x)) for x in xs]
        offset = (index - (len(series) - 1) / 2) * width
        axes.bar(xs + offset, counts, width=width * 0.92, color=run.color,
                 label=_series_label(run, metric, scores.size).replace("\n", " "))
    axes.set_xticks(xs)
    axes.set_xlabel(f"{visible(metric)} score"
                    + (f" (scale {scale_text(scale)})" if scale else ""))
    axes.set_ylabel(_units(series))
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.grid(axis="y")
    axes.set_axisbelow(True)
    # The legend also carries each run's unscored count, so it is shown for a single run too.
    figure.legend(loc="outside upper center", ncols=min(len(series), 3), frameon=False)


def draw_forest(figure: Any, groups: Mapping[str, list[dict[str, Any]]],
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
        color = {1: _UP, -1: _DOWN}.get(ci_excludes_zero(row), _NEUTRAL)
        ci = ci_pair(row.get("ci95"))
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
        if mismatch_text(row.get("signature_mismatch")):
            label += " †"
        labels.append(label)
    axes.axvline(0.0, color="#59636e", linewidth=0.9, linestyle="--", zorder=0)
    span = (max(extent) - min(extent)) or 1.0
    axes.set_xlim(min(extent) - 0.08 * span, max(extent) + 0.08 * span)
    axes.set_yticks(ys, labels)
    axes.set_ylim(-0.8, len(group) - 0.2)
    axes.set_title(visible(metric), loc="left", fontweight="bold")
    axes.grid(axis="x")
    axes.set_axisbelow(True)
    axes.spines["left"].set_visible(False)
    axes.tick_params(axis="y", length=0)
