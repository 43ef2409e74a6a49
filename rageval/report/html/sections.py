"""The report's summary, score-distribution and manifest sections.

The comparison (:mod:`~rageval.report.html.comparison`) and the per-record table
(:mod:`~rageval.report.html.records`) have modules of their own; the page around them is
assembled by :mod:`~rageval.report.html.page`.
"""

from __future__ import annotations

import json
import math

import numpy as np

from rageval.core.results import MetricSummary, Results
from rageval.core.results.counts import MetricCounts, RunCounts
from rageval.core.scale import scale_text
from rageval.report.html.data import ReportRun, drawn_as_bars, headline_names, scored_values
from rageval.report.html.markup import ci_text, esc, num_cell, run_label, table, th
from rageval.report.html.plots import draw_bars, draw_strips, render_svg
from rageval.report.tables import (
    calibration_lines,
    flagged_text,
    panel_lines,
    stability_lines,
)


def summary_section(runs: list[ReportRun]) -> str:
    blocks = ['<section id="summary"><h2>Summary</h2>',
              '<div class="toolbar"><label><input type="checkbox" id="show-components"> '
              "show components (precision, recall, ...)</label></div>"]
    for index, run in enumerate(runs):
        blocks.append(_run_summary(run, index))
    blocks.append('<p class="note">95% CI: bootstrap percentile interval. '
                  "Hover a signature for its long form.</p></section>")
    return "\n".join(blocks)


def _run_summary(run: ReportRun, index: int) -> str:
    source_text = run.results.records_info.source
    created = run.results.manifest.get("created")
    counts = RunCounts.of(run.results)
    facts = [esc(counts.text())]
    if counts.conversations:
        facts.append(esc(counts.n_text()))
    if isinstance(source_text, str):
        facts.append(f"from <code>{esc(source_text)}</code>")
    if isinstance(created, str):
        facts.append(f"scored {esc(created)}")
    head = [th("metric", key="metric", kind="text"), th("value", key="value", kind="num",
            numeric=True), th("scale", title="the range the metric's values take"),
            th("95% CI", numeric=True), th("n", key="n", kind="num",
            numeric=True), th("unscored", key="unscored", kind="num", numeric=True),
            th("signature")]
    headline = set(headline_names(run.results))
    rows = [_summary_row(name, item, name in headline)
            for name, item in run.results.summary.items()]
    return (f"<h3>{run_label(run)}</h3><p class=\"note\">{' · '.join(facts)}</p>"
            + table(f"summary-{index}", head, rows) + _judge_notes(run.results)
            + _reasons_list(run.results))


def _summary_row(name: str, item: MetricSummary, headline: bool) -> str:
    classes = ["headline" if headline else "", "" if item.in_table else "component"]
    class_attr = " ".join(c for c in classes if c)
    label = esc(name) + (' <span class="muted">(corpus)</span>' if item.aggregate == "corpus"
                         else "")
    short = item.short_signature or item.signature
    return (f'<tr class="{class_attr}"><td data-s="{esc(name)}">{label}</td>'
            f"{num_cell(item.value)}"
            f'<td class="scale">{esc(scale_text(item.scale))}</td>'
            f'<td class="num">{ci_text(item.ci95)}</td>'
            f'<td class="num" data-v="{item.n}">{item.n}</td>'
            f'<td class="num" data-v="{item.unscored}">{item.unscored}</td>'
            f'<td class="sig" title="{esc(item.signature)}">{esc(short)}</td></tr>\n')


def _judge_notes(results: Results) -> str:
    """What a judge metric's value rests on, as the terminal says it: the mean calibrated by
    human labels beside the raw one, how often the judge changed its mind between samples,
    a panel's members and their agreement."""
    lines = [*calibration_lines(results), *stability_lines(results), *panel_lines(results)]
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return f'<ul class="judge-notes">{items}</ul>' if items else ""


def _reasons_list(results: Results) -> str:
    """Why records went unscored, and which values are flagged, once per metric (components
    share their metric's reasons)."""
    seen: set[str] = set()
    items = []
    run = RunCounts.of(results)
    for name, item in results.summary.items():
        if item.signature in seen or not (item.reasons or item.flagged):
            continue
        seen.add(item.signature)
        counts = MetricCounts.of(item, run)
        items += [f"<li><b>{esc(name)}</b>: {esc(counts.reason_text(count, reason))}</li>"
                  for reason, count in item.reasons.items()]
        items += [f'<li class="flag"><b>{esc(name)}</b>: {flagged_text(flag, count)}</li>'
                  for flag, count in item.flagged.items()]
    return f'<ul class="reasons">{"".join(items)}</ul>' if items else ""


def distribution_section(runs: list[ReportRun], metrics: list[str]) -> str:
    figures = []
    for index, metric in enumerate(metrics):
        series = [(run, scored_values(run, metric)) for run in runs
                  if metric in run.results.summary]
        figures.append(_distribution_figure(metric, series, f"dist{index}-"))
    dot = "a record"
    if any(RunCounts.of(run.results).conversations for run in runs):
        dot = "what the summary's n counts: a conversation (the mean of its scored turns)"
    note = (f'<p class="note">One plot per headline metric, on the metric\'s scale. Each dot is '
            f"{dot}; boxes show the quartiles, diamonds the mean. Integer scores (judge "
            "rubrics) are shown as counts per score. Unscored values are not drawn: their count "
            "is in each label.</p>")
    body = "\n".join(figures) or '<p class="note">No metrics.</p>'
    return (f'<section id="distributions"><h2>Score distributions</h2>{note}'
            f'<div class="plots">{body}</div></section>')


def _distribution_figure(metric: str, series: list[tuple[ReportRun, np.ndarray]],
                         prefix: str) -> str:
    summary = series[0][0].results.summary[metric] if series else None
    scale = None if summary is None else summary.scale
    if drawn_as_bars(series):
        height = 2.4 + 0.2 * math.ceil(len(series) / 3)
        svg = render_svg(lambda fig: draw_bars(fig, metric, series, scale), height=height,
                         prefix=prefix, label=f"counts of {metric} scores")
    else:
        height = 1.0 + 0.55 * len(series)
        svg = render_svg(lambda fig: draw_strips(fig, metric, series, scale), height=height,
                         prefix=prefix, label=f"distribution of {metric} scores")
    signature = "" if summary is None else summary.signature
    short = "" if summary is None else (summary.short_signature or summary.signature)
    return (f'<figure class="plot" id="plot-{esc(prefix.rstrip("-"))}" data-metric="{esc(metric)}">'
            f"<figcaption><b>{esc(metric)}</b> "
            f'<span class="muted">scale {esc(scale_text(scale))}</span>'
            f'<span class="sig" title="{esc(signature)}">{esc(short)}</span></figcaption>'
            f"{svg}</figure>")


def manifest_section(runs: list[ReportRun]) -> str:
    blocks = ['<section id="manifest"><h2>Manifest</h2>']
    for index, run in enumerate(runs):
        text = json.dumps(run.results.manifest, indent=2, ensure_ascii=False, default=str)
        opened = " open" if index == 0 else ""
        blocks.append(f'<details class="manifest"{opened}><summary>{run_label(run)}</summary>'
                      f'<pre class="manifest" id="manifest-{index}">{esc(text)}</pre></details>')
    blocks.append("</section>")
    return "\n".join(blocks)
