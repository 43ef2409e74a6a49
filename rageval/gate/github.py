"""A run as GitHub Actions shows it (``--github``, on by itself where ``GITHUB_ACTIONS=true``):
a Markdown table for the job's summary page (appended to ``$GITHUB_STEP_SUMMARY``, and what
``--markdown FILE`` writes for a pull-request comment) and workflow-command annotations
(``::error``, ``::warning``) for failed gate checks and failed judge requests.

The table has a row per headline metric: value, the scale its values take, 95% CI, and
against a ``--baseline`` the baseline's value, the change and the paired test's Holm-adjusted
p-value with its significance mark (one scale and one format everywhere:
:mod:`rageval.core.outputs.significance`), then whether the gate's checks of the metric passed.
The heading counts the run as the terminal does
(:class:`~rageval.core.results.counts.RunCounts`).

Every text in them that rageval did not write (metric names, paths, notes quoting record ids
or endpoint errors) goes through :mod:`rageval.core.outputs.text` (Markdown and workflow
commands) after the run's :class:`~rageval.core.outputs.masking.Masker`; each failed check is
said from its one description (:func:`rageval.gate.describe.describe`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rageval.core.manifest import judge_sections
from rageval.core.outputs.masking import NO_SECRETS, Masker
from rageval.core.outputs.significance import marked_p_value
from rageval.core.outputs.text import markdown, markdown_code, workflow_command
from rageval.core.results import Results, count_of
from rageval.core.results.counts import RunCounts
from rageval.core.scale import scale_text
from rageval.gate.describe import describe
from rageval.gate.model import GateRow, format_number

if TYPE_CHECKING:
    from rageval.gate.model import GateReport

__all__ = ["annotations", "summary_markdown"]

# What the failed requests of a manifest section of judge work are called.
_LABELS = {"judge": "judge", "judge_panel": "judge panel", "claims": "claim-level judge"}


def summary_markdown(results: Results, report: GateReport | None, name: str,
                     masker: Masker = NO_SECRETS) -> str:
    """The job summary (and pull-request comment) of one run, every credential ``masker``
    knows masked."""
    mask = masker

    def cell(text: str) -> str:
        return markdown(mask(text))

    def code(text: str) -> str:
        return markdown_code(mask(text))

    rows = report.rows if report is not None else []
    by_metric: dict[str, list[GateRow]] = {}
    for row in rows:
        by_metric.setdefault(row.metric, []).append(row)
    verdict = ("" if report is None else
               " — gate passed" if report.passed else
               f" — gate failed ({count_of(len(report.failures), 'check')})")
    lines = [f"### rageval: {cell(name)} ({RunCounts.of(results).text()}){verdict}", "",
             "| metric | value | scale | 95% CI | baseline | delta | p-value | gate |",
             "| --- | ---: | --- | --- | ---: | ---: | ---: | --- |"]
    for metric, item in results.summary.items():
        if not item.in_table:
            continue
        checks = by_metric.pop(metric, [])
        regression = next((r for r in checks if r.check == "regression"), None)
        ci = ("—" if item.ci95 is None else
              f"[{format_number(item.ci95[0])}, {format_number(item.ci95[1])}]")
        lines.append(" | ".join([
            f"| {code(metric)}", format_number(item.value), scale_text(item.scale), ci,
            _number(regression and regression.baseline), _signed(regression and regression.delta),
            marked_p_value(regression and regression.p_value), _gate(checks)]) + " |")
    for metric, checks in by_metric.items():  # run figures (cost_usd, ...) and unknown names
        lines.append(f"| {code(metric)} | {format_number(checks[0].observed)} | — | — | — "
                     f"| — | — | {_gate(checks)} |")
    failed = [r for r in rows if not r.passed]
    if failed:
        lines += ["", "Failed checks:", ""]
        for row in failed:
            lines.append(f"- {code(row.metric)}: {cell(describe(row).rule_text)}"
                         + (f": {cell(row.note)}" if row.note else ""))
    # A data check that passed says what changed (--allow-data-change) or what was not checked.
    lines += [f"\nData: {cell(r.note)}" for r in rows if r.passed and r.metric == "data"]
    return "\n".join(lines) + "\n"


def annotations(results: Results, report: GateReport | None,
                masker: Masker = NO_SECRETS) -> list[str]:
    """The workflow commands GitHub turns into annotations: an error per failed gate check,
    a warning per kind of judge work whose requests failed (each one whole line)."""
    mask = masker
    out = []
    for row in report.failures if report is not None else []:
        text = describe(row)
        message = text.sentence + (f"; {row.note}" if row.note else "")
        out.append(workflow_command("error", mask(message), title="rageval gate"))
    for section, part in judge_sections(results.manifest).items():
        if part.get("left_out"):
            out.append(workflow_command("warning", mask(_left_out(results, part)),
                                        title="rageval judge"))
        if part.get("failed"):
            label = _LABELS.get(section, section)
            what = (_panel_records(results, part, "their members abstained on those records")
                    if section == "judge_panel" else
                    "their records are unscored with the reason")
            out.append(workflow_command(
                "warning", mask(f"{count_of(part['failed'], 'request')} to the {label} "
                                f"failed; {what}"), title="rageval judge"))
    return out


def _left_out(results: Results, part: Mapping[str, Any]) -> str:
    """What a panel did without the members whose judge stopped (--panel-min-members)."""
    left = part["left_out"]
    names = ", ".join(repr(name) for name in left)
    first = next(iter(left.values()))
    return _panel_records(
        results, part, f"panel {'members' if len(left) > 1 else 'member'} {names} left out "
        f"(--panel-min-members {part.get('min_members')}), the others grading without "
        f"{'them' if len(left) > 1 else 'it'}: {first}")


def _panel_records(results: Results, part: Mapping[str, Any], said: str) -> str:
    """``said``, then whether the panel's records stayed scored."""
    unscored = sum(results.summary[m].unscored for m in part.get("metrics", ())
                   if m in results.summary)
    return said + (f"; {count_of(unscored, 'record')} unscored with the reason" if unscored
                   else "; every record is still scored")


def _gate(checks: list[GateRow]) -> str:
    if not checks:
        return "—"
    return "✅ pass" if all(r.passed for r in checks) else "❌ fail"


def _number(value: float | None) -> str:
    return "—" if value is None else format_number(value)


def _signed(value: float | None) -> str:
    return "—" if value is None else ("+" if value >= 0 else "") + format_number(value)

