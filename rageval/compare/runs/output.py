"""How ``rageval compare`` shows a :class:`~rageval.compare.runs.statistics.Comparison`: one
table per baseline-system pair with the notes a reader needs to trust it, and the ``--json``
rows."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from rageval.compare.command_output import write_json_file
from rageval.compare.runs.statistics import LEVEL, Comparison
from rageval.core.outputs.significance import (
    MARKS,
    marked_p_value,
    p_value_text,
    significance_legend,
    significance_mark,
)
from rageval.core.outputs.text import terminal

__all__ = [
    "MARKS",
    "comparison_table",
    "json_rows",
    "render_comparison",
    "significance_mark",
    "turn_table",
    "write_json",
]


def render_comparison(comparison: Comparison, console: Console, *,
                      components: bool = False) -> None:
    """One table per baseline-system comparison, then the notes a reader needs to trust it:
    signature mismatches, records left out, metrics not compared, what the marks mean."""
    for system in comparison.systems:
        rows = [r for r in comparison.rows_for(system) if r["headline"] or components]
        _print_fitting(console, comparison_table(comparison, system, rows),
                       partial(stacked_comparison, comparison, system, rows, console.width))
        turns = [r for r in comparison.per_turn
                 if r["system"] == system and (r["headline"] or components)]
        if turns:
            _print_fitting(console, turn_table(comparison, system, turns),
                           partial(stacked_turns, comparison, system, turns, console.width))
        for line, style in _notes(comparison, system, rows, components=components):
            console.print(terminal(line), style=style, markup=False, highlight=False)
    dropped = {k: v for k, v in comparison.dropped.items() if v}
    if dropped:
        text = ", ".join(f"{name}: {count}" for name, count in dropped.items())
        console.print(terminal(f"records dropped by --intersect (ids not in every run): {text}"),
                      style="yellow", markup=False, highlight=False)
    for line in _legend(comparison):
        console.print(line, markup=False, highlight=False)


def comparison_table(comparison: Comparison, system: str,
                     rows: Sequence[dict[str, Any]]) -> Table:
    """The table of one comparison (rows already filtered)."""
    # Text, not markup: paths and metric names may hold brackets ("p(rel=2)@5", "run[1]").
    table = Table(title=Text(terminal(_title(comparison, system))), title_justify="left")
    table.add_column("metric", style="bold")
    for label in _COLUMNS:
        table.add_column(label, justify="right")
    # Signatures that agree are said once, in the notes; a column only when one differs.
    differs = any(row["signature_mismatch"] for row in rows)
    if differs:
        table.add_column("signature")
    for row in rows:
        cells = [_label(row), *_cells(row)]
        if differs:
            cells.append(_SIGNATURE[row["signature_mismatch"]])
        table.add_row(*(Text(terminal(cell)) for cell in cells))
    return table


def _title(comparison: Comparison, system: str) -> str:
    unit = "; n counts conversations" if "unit" in comparison.settings else ""
    return (f"{system} vs baseline {comparison.baseline} "
            f"({comparison.n_records} paired records{unit})")


_COLUMNS = ("baseline", "system", "delta", f"{LEVEL:.0%} CI", "p", "p_adj", "W/T/L", "n")
_SIGNATURE = {None: "same", "rageval-version": "rageval version differs", "config": "DIFFERS"}


def _label(row: dict[str, Any]) -> str:
    return row["metric"] + (" (corpus)" if row["aggregate"] == "corpus" else "")


def _cells(row: dict[str, Any]) -> list[str]:
    """A row's figures, in the order of :data:`_COLUMNS`."""
    ci = row["ci95"]
    return [
        _fmt(row["baseline_value"]),
        _fmt(row["system_value"]),
        _fmt(row["delta"], signed=True),
        "—" if ci is None else f"[{_fmt(ci[0], signed=True)}, {_fmt(ci[1], signed=True)}]",
        p_value_text(row["p_value"]),
        marked_p_value(row["p_adjusted"]),
        f"{row['wins']}/{row['ties']}/{row['losses']}",
        str(row["n"]) + (f" (-{row['n_dropped']})" if row["n_dropped"] else ""),
    ]


def turn_table(comparison: Comparison, system: str,
               rows: Sequence[dict[str, Any]]) -> Table:
    """The paired differences at each turn position (runs of conversations)."""
    title = f"{system} vs baseline {comparison.baseline}, turn by turn"
    table = Table(title=Text(terminal(title)), title_justify="left")
    table.add_column("metric", style="bold")
    for label in ("turn", "baseline", "system", "delta", f"{LEVEL:.0%} CI", "n"):
        table.add_column(label, justify="right")
    for row in rows:
        ci = row["ci95"]
        cells = (row["metric"], str(row["turn"]), _fmt(row["baseline_value"]),
                 _fmt(row["system_value"]), _fmt(row["delta"], signed=True),
                 f"[{_fmt(ci[0], signed=True)}, {_fmt(ci[1], signed=True)}]", str(row["n"]))
        table.add_row(*(Text(terminal(cell)) for cell in cells))
    return table


def _print_fitting(console: Console, table: Table, stacked: Callable[[], list[Text]]) -> None:
    """The table where it fits the console's width whole; else its rows stacked, each cell
    with its label, so that no number is ever cut to fit (an 80-column terminal)."""
    natural = Measurement.get(console, console.options.update_width(10**6), table).maximum
    if natural <= console.width:
        console.print(table)
        return
    for line in stacked():
        console.print(line, markup=False, highlight=False)


def stacked_comparison(comparison: Comparison, system: str, rows: Sequence[dict[str, Any]],
                       width: int) -> list[Text]:
    """The narrow layout of :func:`comparison_table`: its title, then per metric its name and
    its labelled figures, packed into lines of ``width`` (a figure never split)."""
    lines = [Text(terminal(_title(comparison, system)), style="bold")]
    for row in rows:
        fields = [f"{label} {cell}" for label, cell in zip(_COLUMNS, _cells(row), strict=True)]
        if row["signature_mismatch"]:
            fields.append(f"signature {_SIGNATURE[row['signature_mismatch']]}")
        lines += _packed(_label(row), fields, width)
    return lines


def stacked_turns(comparison: Comparison, system: str, rows: Sequence[dict[str, Any]],
                  width: int) -> list[Text]:
    """The narrow layout of :func:`turn_table`."""
    lines = [Text(terminal(f"{system} vs baseline {comparison.baseline}, turn by turn"),
                  style="bold")]
    for row in rows:
        ci = row["ci95"]
        fields = [f"baseline {_fmt(row['baseline_value'])}",
                  f"system {_fmt(row['system_value'])}",
                  f"delta {_fmt(row['delta'], signed=True)}",
                  f"{LEVEL:.0%} CI [{_fmt(ci[0], signed=True)}, {_fmt(ci[1], signed=True)}]",
                  f"n {row['n']}"]
        lines += _packed(f"{row['metric']} turn {row['turn']}", fields, width)
    return lines


def _packed(head: str, fields: list[str], width: int) -> list[Text]:
    """``head`` on its own line, then the fields two spaces apart, indented, as many to a
    line as ``width`` holds (a field longer than a line gets a line of its own)."""
    lines, current = [Text(terminal(head), style="bold")], ""
    for field in map(terminal, fields):
        joined = f"{current}  {field}" if current else f"  {field}"
        if current and len(joined) > width:
            lines.append(Text(current))
            joined = f"  {field}"
        current = joined
    if current:
        lines.append(Text(current))
    return lines


def json_rows(comparison: Comparison) -> list[dict[str, Any]]:
    """What ``--json`` writes: a list of rows, one per (system, metric), each carrying the
    settings that reproduce its statistics (resamples, permutations, seed, level); for runs
    of conversations, then one per (system, metric, turn position), with ``turn``."""
    keep = ("level", "resamples", "permutations", "seed", "intersect")
    settings = {key: comparison.settings[key] for key in keep}
    counts = {"records_paired": comparison.n_records,
              "records_dropped": dict(comparison.dropped)}
    turn_by_turn = [{**row, **counts, **settings} for row in comparison.per_turn]
    return [{**row, **counts, **settings} for row in comparison.rows] + turn_by_turn


def write_json(comparison: Comparison, path: str | os.PathLike[str]) -> None:
    """Write the comparison's rows as a JSON list; a crash never leaves a torn file."""
    write_json_file(json_rows(comparison), path)


def _notes(comparison: Comparison, system: str, rows: Sequence[dict[str, Any]], *,
           components: bool = False) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    if rows and not any(row["signature_mismatch"] for row in rows):
        lines.append(("signatures: the same in both runs for every metric shown", ""))
    for row in rows:
        if row["signature_mismatch"] is None:
            continue
        changes = ", ".join(f"{key} {_or_none(a)} -> {_or_none(b)}"
                            for key, (a, b) in row["signature_diff"].items())
        if row["signature_mismatch"] == "config":
            lines.append((f"{row['metric']}: signatures differ ({changes}): the values may not "
                          f"be comparable", "red"))
        else:
            lines.append((f"{row['metric']}: only the rageval version differs ({changes}): "
                          f"comparable unless that release changed the metric", "yellow"))
    for row in rows:
        if row["n"] == 0:
            lines.append((f"{row['metric']}: no record is scored in both runs", "yellow"))
    lines += [(text, "") for row in rows if (text := _calibrated_text(row)) is not None]
    missing = comparison.not_compared.get(system, {})
    for key, where in (("baseline_only", comparison.baseline), ("system_only", system)):
        names = missing.get(key) or []
        if not components:  # a metric's components go with it, and are not shown apart
            compared = {row["metric"] for row in comparison.rows_for(system)}
            names = [n for n in names if n.rpartition(".")[0] not in {*names, *compared}]
        if names:
            lines.append((f"only in {where}, not compared: {', '.join(names)}", "yellow"))
    return lines


def _calibrated_text(row: dict[str, Any]) -> str | None:
    """The calibrated difference of a rubric judge row, or why there is none."""
    c = row.get("calibrated")
    if c is None:
        return None
    human = c.get("human")
    alone = ("" if human is None else
             f"; the labels alone: {_fmt(human['delta'], signed=True)} "
             f"[{_fmt(human['ci95'][0], signed=True)}, {_fmt(human['ci95'][1], signed=True)}]")
    if "delta" not in c:
        return f"{row['metric']}: no calibrated difference: {c['refused']}{alone}"
    low, high = c["ci95"]
    verdict = ("the interval holds 0: no difference is established" if c["crosses_zero"]
               else "the interval excludes 0")
    return (f"{row['metric']}: calibrated by {c['labelled']} labelled pairs (PPI, "
            f"{c['unlabelled']} unlabelled): delta {_fmt(c['delta'], signed=True)} "
            f"[{_fmt(low, signed=True)}, {_fmt(high, signed=True)}]; {verdict}{alone}")


def _legend(comparison: Comparison) -> list[str]:
    settings = comparison.settings
    methods = {r["p_method"] for r in comparison.rows} - {None}
    test = ("exact, all relabellings enumerated" if methods == {"exact"}
            else f"{settings['permutations']} random relabellings")
    bootstrap = "percentile"
    if settings.get("method") == "poisson":  # streamed: weights and signs from the ids
        test, bootstrap = f"{test} from each record's id", "Poisson"
    return [
        f"{significance_legend('p_adj')} (Holm within each comparison, "
        "headline and component rows as separate families)",
        f"p: two-sided paired randomization test ({test}); CI: paired {bootstrap} bootstrap "
        f"({settings['resamples']} resamples); seed {settings['seed']}",
    ]


def _or_none(value: str | None) -> str:
    return "(absent)" if value is None else value


def _fmt(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "—"
    sign = "+" if signed else ""
    if round(value, 4) == 0:
        value = 0.0  # no "-0.0000" for a difference that rounds to nothing
    return f"{value:{sign}.4f}" if abs(value) < 1000 else f"{value:{sign}.1f}"

