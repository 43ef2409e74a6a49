"""The regression gate: this run against a baseline run, metric by metric, on paired records.

The statistics are ``rageval compare``'s (:func:`rageval.compare.runs.statistics.compare_pair`:
records paired by id, a paired randomization test, corpus figures such as BLEU recomputed from
their per-record statistics). A metric fails only when both hold:

- its **drop** is over ``max_drop``: baseline minus current for a higher-is-better metric,
  current minus baseline (a rise) for a lower-is-better one (mean rank, hallucination);
- the drop is **significant**: the two-sided paired randomization test, Holm-adjusted over the
  metrics this gate checks, gives p < ``alpha``.

A drop over the limit that the test cannot tell from noise passes, with a note saying so: an
evaluation set of 30 records moves by a few points between two runs of the same system, and a
build must not fail on that. Records are compared on the ids both runs have (those only one run
has are named in every note), and a signature that differs from the baseline's is noted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rageval.compare.runs.pairing import (
    NamedRun,
    PairKey,
    conversation_groups,
    pair_key,
    pair_record_ids,
    whole_block,
)
from rageval.compare.runs.statistics import Draws, compare_pair
from rageval.core.errors import UsageError
from rageval.core.outputs.significance import p_value_text
from rageval.core.results import Results
from rageval.gate.data import data_row
from rageval.gate.direction import lower_is_better
from rageval.gate.model import GateRow
from rageval.gate.model import format_number as num
from rageval.gate.thresholds import unknown_name_note
from rageval.stats.resampling import holm

__all__ = ["check_regression"]

_BASE, _CURRENT = "baseline", "this run"
_SHOWN_IDS = 3


def check_regression(
    results: Results,
    baseline: Results,
    *,
    max_drop: float,
    metrics: Sequence[str] | None = None,
    alpha: float = 0.05,
    seed: int = 0,
    resamples: int = 10_000,
    permutations: int = 10_000,
    allow_data_change: bool = False,
) -> list[GateRow]:
    """One row per checked metric: the headline metrics both runs have (``metrics=None``, in
    the baseline's order) or the named ones (a name missing from either run fails). See the
    module for the rule; ``seed``, ``resamples`` and ``permutations`` are compare's.

    First, the data: a baseline that scored other data for a checked metric (other records,
    other field values, another judge configuration; :mod:`rageval.gate.data`) gives one
    failing ``data`` row and nothing is compared, unless ``allow_data_change``, which keeps the
    row (passing, saying what changed) and compares."""
    _check_settings(max_drop, alpha)
    draws = Draws(resamples, permutations, seed).check()
    wanted, absent = _wanted(results, baseline, metrics, max_drop)
    if not wanted and not absent:
        return [GateRow("regression", "*", _rule(max_drop, False), None, False,
                        "this run and the baseline share no headline metric: nothing compared")]
    data = data_row(results, baseline, wanted, allow_data_change)
    if data is not None and not data.passed:
        return [data]
    rows: dict[str, GateRow] = dict(absent)
    if wanted:
        base = NamedRun(_BASE, _only(baseline, wanted))
        current = NamedRun(_CURRENT, _only(results, wanted))
        ids, positions, _ = pair_record_ids([base, current], intersect=True)
        threads = conversation_groups(base.results.records, positions[_BASE])
        names = [n for n in base.results.summary if n in current.results.summary]
        block = whole_block(base, current, names, (positions[_BASE], positions[_CURRENT]),
                            threads)
        compared, _ = compare_pair(base, current, block, draws)
        p_values = [math.nan if r["p_value"] is None else r["p_value"] for r in compared]
        adjusted = holm(np.array(p_values, dtype=np.float64))
        tested = sum(not math.isnan(p) for p in p_values)
        left_out = _left_out(baseline, results, set(ids))
        for row, p in zip(compared, adjusted, strict=True):
            rows[row["metric"]] = _row(row, None if math.isnan(p) else float(p), max_drop,
                                       alpha, tested, left_out)
    order = list(metrics) if metrics is not None else wanted
    return [*([data] if data is not None else []), *(rows[n] for n in dict.fromkeys(order))]


def _wanted(results: Results, baseline: Results, metrics: Sequence[str] | None,
            max_drop: float) -> tuple[list[str], dict[str, GateRow]]:
    """The output names to compare, and a failing row for each named one a run lacks."""
    ours, theirs = results.summary, baseline.summary
    if metrics is None:
        return [n for n, item in theirs.items() if item.in_table and n in ours], {}
    absent = {}
    for name in metrics:
        if name not in ours:
            note = unknown_name_note(name, list(ours))
        elif name not in theirs:
            note = "not in the baseline: nothing to compare with"
        else:
            continue
        rule = _rule(max_drop, lower_is_better(name))
        absent[name] = GateRow("regression", name, rule, None, False, note)
    return [n for n in dict.fromkeys(metrics) if n not in absent], absent


def _only(results: Results, names: Sequence[str]) -> Results:
    """The run with only these outputs in its summary: compare then computes no others."""
    return Results(results.records, {n: results.summary[n] for n in names}, results.manifest)


def _row(row: dict[str, Any], p: float | None, max_drop: float, alpha: float, family: int,
         left_out: str) -> GateRow:
    name = row["metric"]
    lower = lower_is_better(name)
    rule = _rule(max_drop, lower)
    word = "rise" if lower else "drop"
    if row["delta"] is None:
        note = "no record scored in both runs: nothing to compare"
        return GateRow("regression", name, rule, None, False, note + _extras(row, left_out))
    drop = (row["delta"] if lower else -row["delta"]) + 0.0  # + 0.0: no "-0.0" for no change
    values = f"{num(row['baseline_value'])} -> {num(row['system_value'])}"
    test = "paired randomization test" + (", exact" if row["p_method"] == "exact" else "")
    if family > 1:
        test += f", Holm over {family} metrics"
    p_text = _p_text(p)
    # A drop equal to max_drop passes even when the mean of differences is off in the last bit.
    over = drop > max_drop and not math.isclose(drop, max_drop, rel_tol=1e-9, abs_tol=1e-12)
    significant = p is not None and p < alpha
    if over and significant:
        note = f"{word} {num(drop)}, {p_text} ({test}); {values}"
    elif over:
        note = f"{word} {num(drop)} but not significant ({p_text}, {test}); {values}"
    else:
        note = f"{values}, {p_text} ({test})"
    passed = not (over and significant)
    return GateRow("regression", name, rule, drop, passed, note + _extras(row, left_out),
                   baseline=row["baseline_value"], delta=row["delta"], p_value=p, label=word,
                   value=row["system_value"])


def _p_text(p: float | None) -> str:
    """``p=0.0185``, ``p<0.0001``: the p-value written as the Markdown table and ``rageval
    compare`` write it beside the same note."""
    text = p_value_text(p)
    return f"p{text}" if text.startswith("<") else f"p={text}"


def _rule(max_drop: float, lower: bool) -> str:
    if lower:
        return f"rise <= {num(max_drop)} vs baseline (lower is better)"
    return f"drop <= {num(max_drop)} vs baseline"


def _extras(row: dict[str, Any], left_out: str) -> str:
    """What a reader of the row must know besides the numbers: records left out, and a
    signature that differs from the baseline's (the numbers may not be comparable)."""
    out = ""
    if row["n_dropped"]:
        out += f"; {row['n_dropped']} records unscored in either run left out"
    kind, diff = row["signature_mismatch"], row["signature_diff"]
    if kind == "rageval-version":
        out += "; signature differs from the baseline's in the rageval version only"
    elif kind == "config":
        out += f"; signature differs from the baseline's ({', '.join(diff)}): the numbers " \
               "may not be comparable"
    return out + left_out


def _left_out(baseline: Results, results: Results, paired: set[PairKey]) -> str:
    """``; 2 ids only in the baseline ('q7', 'q8') left out`` for each run, or nothing."""
    out = ""
    for where, run in (("the baseline", baseline), ("this run", results)):
        extra = [r.id for r in run.records if pair_key(r) not in paired]
        if extra:
            shown = ", ".join(repr(i) for i in extra[:_SHOWN_IDS])
            more = f" and {len(extra) - _SHOWN_IDS} more" if len(extra) > _SHOWN_IDS else ""
            out += f"; {len(extra)} record ids only in {where} ({shown}{more}) left out"
    return out


def _check_settings(max_drop: float, alpha: float) -> None:
    if isinstance(max_drop, bool) or not isinstance(max_drop, (int, float)) \
            or not math.isfinite(max_drop) or max_drop < 0:
        raise UsageError(f"max_drop must be a finite number of at least 0, got {max_drop!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise UsageError(f"alpha must be a number between 0 and 1, got {alpha!r}")
