"""Terminal presentation of results and of the metric catalogue (presentation only); text that
rageval did not write (names, reasons quoting record ids or endpoint errors) made safe for a
terminal and a CI log by :func:`rageval.core.outputs.text.terminal`."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rageval.core.metric import Metric
from rageval.core.outputs.text import terminal
from rageval.core.params import render_value
from rageval.core.registry import metric_classes
from rageval.core.results import Results, count_of
from rageval.core.results.counts import MetricCounts, RunCounts
from rageval.core.scale import scale_text


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:.1f}"


def summary_table(results: Results, *, components: bool = False) -> Table:
    """The summary: value, its scale (a 1-5 rubric beside a 0-1 ratio), 95% CI, scored and
    unscored counts; values first, so that a row fits on one line (the signatures follow
    once, below: :func:`signatures_table`).

    Unless ``components`` is set, only each metric's headline values are shown.
    """
    table = Table(title=f"rageval summary ({_run_size(results)})", title_justify="left")
    # Numbers never wrap or shrink; on a narrow terminal a long metric name folds instead.
    table.add_column("metric", style="bold", overflow="fold")
    table.add_column("value", justify="right", no_wrap=True, min_width=7)
    table.add_column("scale", no_wrap=True)
    table.add_column("95% CI", justify="right", no_wrap=True, min_width=16)
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("unscored", justify="right", no_wrap=True)
    for name, item in results.summary.items():
        if not (item.in_table or components):
            continue
        ci = "—" if item.ci95 is None else f"[{_fmt(item.ci95[0])}, {_fmt(item.ci95[1])}]"
        label = name + (" (corpus)" if item.aggregate == "corpus" else "")
        table.add_row(Text(terminal(label)), _fmt(item.value), scale_text(item.scale), ci,
                      str(item.n),
                      str(item.unscored))
    return table


def _run_size(results: Results) -> str:
    """``8 records``, or for a run with conversations what it summed up over."""
    counts = RunCounts.of(results)
    if not counts.conversations:
        return counts.text()
    return f"{counts.text()}; {counts.n_text()}"


def signatures_table(results: Results) -> Table:
    """Each configuration's signature once, in its short form (``m:ndcg|k:3|...``; the README
    explains the keys, summary.json holds the long form): components of one metric share
    their metric's signature and are not repeated."""
    table = Table(title="signatures (short form)", title_justify="left")
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("signature", overflow="fold")
    seen: set[str] = set()
    for name, item in results.summary.items():
        if item.signature in seen:
            continue
        seen.add(item.signature)
        signature = item.short_signature or item.signature
        table.add_row(Text(terminal(name)), Text(terminal(signature)))
    return table


def unscored_lines(results: Results) -> list[str]:
    """One line per (metric, reason) so that no unscored record goes unexplained, and one per
    (metric, flag) so that no flagged value goes unnoticed."""
    lines: list[str] = []
    seen: set[str] = set()
    run = RunCounts.of(results)
    for name, item in results.summary.items():
        # Components of one metric share its signature and reasons: report them once.
        if item.signature in seen:
            continue
        seen.add(item.signature)
        # A value scored per turn and summed up over conversations counts its reasons by turn.
        counts = MetricCounts.of(item, run)
        lines += [f"{name}: {counts.reason_text(count, reason)}"
                  for reason, count in item.reasons.items()]
        lines += [f"{name}: {flagged_text(flag, count)}" for flag, count in item.flagged.items()]
    return lines


def calibration_lines(results: Results) -> list[str]:
    """One line per metric calibrated by human labels: the calibrated mean and CI beside the
    raw mean and what the labels alone say, or why there is no calibrated mean; then, for
    labels read from a labels file, what they are (:func:`labels_lines`)."""
    lines = []
    for name, item in results.summary.items():
        c = item.calibrated
        if c is None:
            continue
        alone = ("" if c.human_mean is None or c.human_ci95 is None else
                 f"; the labels alone: {_fmt(c.human_mean)} {_interval(c.human_ci95)}")
        if c.mean is None or c.ci95 is None:
            lines.append(f"{name}: not calibrated: {c.refused}{alone}")
            continue
        tuned = ("" if c.tuned_mean is None or c.tuned_ci95 is None else
                 f"; PPI++ {_fmt(c.tuned_mean)} {_interval(c.tuned_ci95)}")
        how = ("active inference, " + count_of(c.unlabelled, "record") + " passed over"
               if c.method == "active" else f"PPI, {c.unlabelled} unlabelled")
        lines.append(f"{name} calibrated by {count_of(c.labelled, 'human label')} ({how}): "
                     f"{_fmt(c.mean)} {_interval(c.ci95)}{tuned}; "
                     f"the judge alone: {_fmt(item.value)}{alone}")
    return lines + labels_lines(results)


def labels_lines(results: Results) -> list[str]:
    """One line per metric labelled in a labels file (``--human-labels``): the file, the
    labelled records, each annotator's count, the selection and the annotators' agreement;
    then the labels ignored."""
    about = results.manifest.get("human_labels")
    if not isinstance(about, dict) or "file" not in about:
        return []
    lines = []
    for name, item in about.get("metrics", {}).items():
        counts = ", ".join(f"{who} {n}" for who, n in item.get("annotators", {}).items())
        agreement = item.get("agreement")
        agree = ""
        if agreement:
            kappa = agreement.get("cohen_kappa_quadratic")
            agree = (f"; agreement over {count_of(agreement['records'], 'common record')}: "
                     f"Krippendorff's alpha (interval) {_fmt(agreement['krippendorff_alpha'])}"
                     + ("" if "cohen_kappa_quadratic" not in agreement else
                        f", Cohen's kappa (quadratic) {_fmt(kappa)}"))
        lines.append(f"{name} labels from {about['file']}: "
                     f"{count_of(item.get('labelled', 0), 'record')} labelled ({counts}), "
                     f"{item.get('selection')} selection{agree}")
        waiting = item.get("waiting")
        if waiting:
            there = (f"record {waiting['record']!r} there, selected, has no label (a skip or "
                     "an undo)" if waiting.get("record") else
                     "no line of the file is at that position")
            lines.append(f"{name}: the active walk is complete up to position "
                         f"{waiting['position']}; {there}, and the "
                         f"{count_of(waiting['labels'], 'label')} after it are left out of the "
                         "calibration until it has an outcome")
        budgets = item.get("budgets")
        if budgets:
            lines.append(f"{name}: the active walk's records were drawn under "
                         f"{len(budgets)} budgets ({', '.join(f'{b:g}' for b in budgets)}); "
                         "its estimate is unbiased once the walk is labelled to its end, and "
                         "can lean either way while it is unfinished")
    if about.get("unknown_ignored"):
        lines.append(f"ignored {count_of(about['unknown_ignored'], 'label')} of record ids the "
                     f"run does not have (--allow-unknown-labels)")
    for metric, n in about.get("other_metrics", {}).items():
        lines.append(f"ignored {count_of(n, 'label')} for {metric}, not a metric of the run "
                     f"on a fixed scale")
    return lines


def stability_lines(results: Results) -> list[str]:
    """One line per judge metric asked several times per item: how often it changed its
    mind, and how far its samples spread."""
    lines = []
    for name, item in results.summary.items():
        figures = item.figures.get("stability")
        if not figures or not figures.get("items"):
            continue
        noise = "; its CI holds the judge's noise" if item.ci_method == "judge-noise" else ""
        lines.append(f"{name}: {figures['samples']} samples per item; "
                     f"{figures['flip_rate']:.1%} of {count_of(figures['items'], 'item')} flip "
                     f"between samples (mean SD {_fmt(figures['mean_sd'])}){noise}")
    return lines


def panel_lines(results: Results) -> list[str]:
    """One line per metric a judge panel graded: its rule, how far its members agree, and
    the abstentions."""
    lines = []
    for name, item in results.summary.items():
        panel = item.figures.get("panel")
        if not panel:
            continue
        alpha = panel["krippendorff_alpha"]
        members = panel["members"]
        means = ", ".join(_member_text(member, m) for member, m in members.items())
        left = sum(1 for m in members.values() if m.get("left_out"))
        went_on = (f"; went on with {len(members) - left} of {len(members)} members "
                   f"(--panel-min-members {panel.get('min_members')})" if left else "")
        lines.append(f"{name}: panel of {len(panel['members'])} ({panel['rule']}): "
                     f"Krippendorff's alpha {_fmt(alpha)} ({panel['alpha_level']}, "
                     f"{count_of(panel['items_rated_twice'], 'record')} rated twice or more); "
                     f"members: {means}{went_on}")
    return lines


def _member_text(member: str, figures: dict[str, Any]) -> str:
    """A panel member's mean and abstentions, or that it was left out."""
    if figures.get("left_out"):
        return f"{member} left out (its judge stopped; {figures['abstained']} abstained)"
    abstained = f" ({figures['abstained']} abstained)" if figures["abstained"] else ""
    return f"{member} {_fmt(figures['mean'])}{abstained}"


def _interval(ci: tuple[float, float]) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def flagged_text(flag: str, count: int) -> str:
    """``count`` records flagged ``flag``: their values stand, with a warning."""
    return (f"{count_of(count, 'record')} flagged {flag}: scored, but read the records' "
            "flag_reasons before trusting the values")


def metrics_table() -> Table:
    """Every registered metric with its parameters and a one-line definition."""
    table = Table(title="rageval metrics", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("cutoff")
    table.add_column("parameters", overflow="fold")
    table.add_column("definition", overflow="fold")
    for base, cls in metric_classes().items():
        table.add_row(base, _cutoff_text(cls), _params_text(cls), cls.summary)
    return table


def named_metrics_table(title: str, entries: list[tuple[str, type[Metric], str]]) -> Table:
    """Metrics of a name-prefixed family (``tools:f1``, ...): each name with its class's
    parameters and its definition."""
    table = Table(title=title, title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("parameters", overflow="fold")
    table.add_column("definition", overflow="fold")
    for name, cls, summary in entries:
        table.add_row(name, _params_text(cls), summary)
    return table


def _cutoff_text(cls: type[Metric]) -> str:
    return {"none": "", "optional": "@k optional", "required": "@k required"}[cls.cutoff_rule]


def _params_text(cls: type[Metric]) -> str:
    parts = []
    for p in cls.params:
        choices = f" ({'|'.join(map(str, p.choices))})" if p.choices else ""
        default = "none" if p.default is None else render_value(p.default)
        parts.append(f"{p.name}={default}{choices}: {p.doc}")
    return "\n".join(parts)


def print_summary(results: Results, console: Console, *, components: bool = False,
                  signatures: bool = False) -> None:
    """The summary table, the reasons for unscored values, and the signatures (their table
    with ``signatures``, else one line saying where they are)."""
    console.print(summary_table(results, components=components))
    for line in [*calibration_lines(results), *stability_lines(results),
                 *panel_lines(results)]:
        console.print(terminal(line), markup=False, highlight=False)
    for line in unscored_lines(results):
        console.print(terminal(line), style="yellow", markup=False, highlight=False)
    if signatures:
        console.print(signatures_table(results))
    else:
        console.print("each value has a signature (the configuration that produced it): "
                      "--signatures shows them, summary.json holds them in full", style="dim",
                      markup=False, highlight=False)
