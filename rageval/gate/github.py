"""A run as GitHub Actions shows it (``--github``, on by itself where ``GITHUB_ACTIONS=true``):
a Markdown table for the job's summary page (appended to ``$GITHUB_STEP_SUMMARY``, and what
``--markdown FILE`` writes for a pull-request comment) and workflow-command annotations
(``::error``, ``::warning``) for failed gate checks and failed judge requests.

The table has a row per headline metric: value, 95% CI, and against a ``--baseline`` the
baseline's value, the change and the paired test's Holm-adjusted p-value, then whether the
gate's checks of the metric passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rageval.core.manifest import judge_sections
from rageval.core.results import Results, count_of
from rageval.gate.model import GateRow, format_number

if TYPE_CHECKING:
    from rageval.gate.model import GateReport

__all__ = ["annotations", "summary_markdown"]

# What the failed requests of a manifest section of judge work are called.
_LABELS = {"judge": "judge", "judge_panel": "judge panel", "claims": "claim-level judge"}


def summary_markdown(results: Results, report: GateReport | None, name: str) -> str:
    """The job summary (and pull-request comment) of one run."""
    rows = report.rows if report is not None else []
    by_metric: dict[str, list[GateRow]] = {}
    for row in rows:
        by_metric.setdefault(row.metric, []).append(row)
    verdict = ("" if report is None else
               " — gate passed" if report.passed else
               f" — gate failed ({count_of(len(report.failures), 'check')})")
    lines = [f"### rageval: {_cell(name)} ({count_of(len(results.records), 'record')})"
             f"{verdict}", "",
             "| metric | value | 95% CI | baseline | delta | p-value | gate |",
             "| --- | ---: | --- | ---: | ---: | ---: | --- |"]
    for metric, item in results.summary.items():
        if not item.in_table:
            continue
        checks = by_metric.pop(metric, [])
        regression = next((r for r in checks if r.check == "regression"), None)
        ci = ("—" if item.ci95 is None else
              f"[{format_number(item.ci95[0])}, {format_number(item.ci95[1])}]")
        lines.append(" | ".join([
            f"| `{_cell(metric)}`", format_number(item.value), ci,
            _number(regression and regression.baseline), _signed(regression and regression.delta),
            _p(regression and regression.p_value), _gate(checks)]) + " |")
    for metric, checks in by_metric.items():  # run figures (cost_usd, ...) and unknown names
        lines.append(f"| `{_cell(metric)}` | {format_number(checks[0].observed)} | — | — | — "
                     f"| — | {_gate(checks)} |")
    failed = [r for r in rows if not r.passed]
    if failed:
        lines += ["", "Failed checks:", ""]
        lines += [f"- `{_cell(r.metric)}` {_cell(r.rule)}: {_cell(r.note)}" for r in failed]
    # A data check that passed says what changed (--allow-data-change) or what was not checked.
    lines += [f"\nData: {_cell(r.note)}" for r in rows if r.passed and r.metric == "data"]
    return "\n".join(lines) + "\n"


def annotations(results: Results, report: GateReport | None) -> list[str]:
    """The workflow commands GitHub turns into annotations: an error per failed gate check,
    a warning per kind of judge work whose requests failed."""
    out = []
    for row in report.failures if report is not None else []:
        observed = "" if row.metric == "data" else (
            f"{row.metric} = {format_number(row.observed)}, needed {row.rule}: ")
        out.append(_command("error", "rageval gate", observed + row.note))
    for section, part in judge_sections(results.manifest).items():
        if part.get("left_out"):
            out.append(_command("warning", "rageval judge", _left_out(results, part)))
        if part.get("failed"):
            label = _LABELS.get(section, section)
            what = (_panel_records(results, part, "their members abstained on those records")
                    if section == "judge_panel" else
                    "their records are unscored with the reason")
            out.append(_command("warning", "rageval judge",
                                f"{count_of(part['failed'], 'request')} to the {label} "
                                f"failed; {what}"))
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


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.2g}"


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _command(kind: str, title: str, message: str) -> str:
    """A workflow command, its data and properties escaped as GitHub reads them."""
    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    prop = data(title).replace(":", "%3A").replace(",", "%2C")
    return f"::{kind} title={prop}::{data(message)}"
