"""The statistics of ``rageval compare``: one row per (system, metric) of a :class:`Comparison`.

:func:`compare_pair` compares one system with the baseline on the paired records: for each
output name both runs have, the two values, the delta, its paired bootstrap CI, a paired
randomization test (corpus metrics recomputed from their sufficient statistics), Holm within the
headline and component families, wins/ties/losses and the signature check
(:func:`signature_diff`, :func:`mismatch_kind`). The methods are described in
:mod:`rageval.compare.runs.compare`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rageval.compare.runs.corpus import corpus_resampler, record_details
from rageval.compare.runs.pairing import NamedRun, PairedBlock
from rageval.core.errors import MOST_RESAMPLES, check_int
from rageval.stats.exact import exact_group_means, exact_mean
from rageval.stats.groups import group_means, group_sums
from rageval.stats.resampling import holm, paired_bootstrap, randomization_test

__all__ = [
    "LEVEL",
    "Comparison",
    "Draws",
    "Tally",
    "adjust",
    "compare_pair",
    "finite",
    "mismatch_kind",
    "missing_outputs",
    "paired_means",
    "row_head",
    "signature_diff",
    "tally",
]

# The confidence level of every CI of a comparison.
LEVEL = 0.95


@dataclass(frozen=True)
class Draws:
    """How a comparison draws: ``resamples`` of its bootstrap, ``permutations`` (relabellings)
    of its randomization test, and the ``seed`` both derive from."""

    resamples: int = 10_000
    permutations: int = 10_000
    seed: int = 0

    def check(self) -> Draws:
        """The draws, each within its bounds (:class:`UsageError` naming the one that is not)."""
        for name, low, high in (("resamples", 1, MOST_RESAMPLES),
                                ("permutations", 1, MOST_RESAMPLES), ("seed", 0, None)):
            check_int(name, getattr(self, name), low, high=high)
        return self

    def settings(self) -> dict[str, int]:
        """The draws as a comparison's settings report them."""
        return {"resamples": self.resamples, "permutations": self.permutations,
                "seed": self.seed}


@dataclass(frozen=True)
class Comparison:
    """Every baseline-vs-system comparison of one ``compare`` call.

    ``rows`` holds one dict per (system, metric), in system order then the baseline's metric
    order; ``dropped`` is how many records each run lost to ``intersect`` (0 without it).
    ``not_compared`` lists, per system, the output names present in only one of the two runs.
    """

    baseline: str
    systems: tuple[str, ...]
    rows: list[dict[str, Any]]
    dropped: dict[str, int]
    n_records: int
    settings: dict[str, Any]
    not_compared: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # For runs of conversations: the paired differences at each turn position (.turns).
    per_turn: list[dict[str, Any]] = field(default_factory=list)

    def rows_for(self, system: str) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["system"] == system]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (no NaN anywhere: missing numbers are None)."""
        return {
            "baseline": self.baseline,
            "systems": list(self.systems),
            "records": {"paired": self.n_records, "dropped": dict(self.dropped)},
            "settings": dict(self.settings),
            "not_compared": {k: dict(v) for k, v in self.not_compared.items()},
            "rows": [dict(row) for row in self.rows],
            **({"per_turn": [dict(row) for row in self.per_turn]} if self.per_turn else {}),
        }


@dataclass
class _Metric:
    """One output name of one comparison, on the paired records."""

    name: str
    base: np.ndarray  # per-record values in pairing order, NaN where unscored
    system: np.ndarray
    corpus: bool
    row: dict[str, Any]

    @property
    def kept(self) -> np.ndarray:
        """Records scored in both runs: the pairs this metric is compared on."""
        return ~(np.isnan(self.base) | np.isnan(self.system))


def compare_pair(base: NamedRun, system: NamedRun, block: PairedBlock,
                 draws: Draws) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The rows of one baseline-system comparison held in memory (``block``: every pair of
    the outputs both runs have, :func:`~rageval.compare.runs.pairing.whole_block`),
    Holm-adjusted within it, and the output names only one of the two runs has
    (``baseline_only``, ``system_only``). With the block's ``groups`` (each pair's
    conversation), values, deltas and counts are over conversations (each the mean of its
    paired turns) and conversations are resampled and relabelled whole."""
    bsum, ssum = base.results.summary, system.results.summary
    missing = missing_outputs(base, system)
    groups = block.groups
    metrics = []
    for name in block.names:
        b, s = block.values(name)
        corpus = bsum[name].aggregate == "corpus" and ssum[name].aggregate == "corpus"
        metrics.append(_Metric(name, b, s, corpus,
                               row_head(name, base, system, tally(b, s, groups), corpus)))
    tested = [m for m in metrics if m.row["n"] > 0]
    if tested:
        _measure(tested, base, system, (block.base_rows, block.system_rows), draws, groups)
    rows = [m.row for m in metrics]
    adjust(rows)
    return rows, missing


@dataclass
class Tally:
    """Wins, ties and losses of the system over the units (records, or conversations) both
    runs score, how many that is, and how many units were left out (unscored in either)."""

    wins: int = 0
    ties: int = 0
    losses: int = 0
    n: int = 0
    dropped: int = 0

    def __iadd__(self, other: Tally) -> Tally:
        self.wins += other.wins
        self.ties += other.ties
        self.losses += other.losses
        self.n += other.n
        self.dropped += other.dropped
        return self


def tally(b: np.ndarray, s: np.ndarray, groups: np.ndarray | None = None) -> Tally:
    """The :class:`Tally` of paired values; with ``groups`` (each pair's conversation,
    numbered from 0), of conversations, each the mean of its paired turns."""
    kept = ~(np.isnan(b) | np.isnan(s))
    bk, sk = b[kept], s[kept]
    if groups is not None:  # each conversation's mean over its paired turns
        count = int(groups.max()) + 1 if len(groups) else 0
        scored = np.bincount(groups[kept], minlength=count) > 0
        bk = group_means(b, kept, groups, count)[scored]
        sk = group_means(s, kept, groups, count)[scored]
        kept = scored
    return Tally(int((sk > bk).sum()), int((sk == bk).sum()), int((sk < bk).sum()),
                 int(kept.sum()), int((~kept).sum()))


def missing_outputs(base: NamedRun, system: NamedRun) -> dict[str, list[str]]:
    """The output names only one of the two runs has (``baseline_only``, ``system_only``)."""
    bsum, ssum = base.results.summary, system.results.summary
    return {"baseline_only": [n for n in bsum if n not in ssum],
            "system_only": [n for n in ssum if n not in bsum]}


def row_head(name: str, base: NamedRun, system: NamedRun, counts: Tally,
             corpus: bool) -> dict[str, Any]:
    """The row's identity, counts and signature check (the statistics come later)."""
    diff = signature_diff(base.results.summary[name].signature,
                          system.results.summary[name].signature)
    return {
        "metric": name,
        "baseline": base.name,
        "system": system.name,
        "baseline_value": None,
        "system_value": None,
        "delta": None,
        "ci95": None,
        "p_value": None,
        "p_adjusted": None,
        "wins": counts.wins,
        "ties": counts.ties,
        "losses": counts.losses,
        "n": counts.n,
        "n_dropped": counts.dropped,
        "headline": bool(base.results.summary[name].in_table),
        "aggregate": "corpus" if corpus else "mean",
        "p_method": None,
        "holm_family": None,
        "signature_mismatch": mismatch_kind(diff),
        "signature_diff": diff,
    }


def _measure(
    metrics: list[_Metric],
    base: NamedRun,
    system: NamedRun,
    positions: tuple[np.ndarray, np.ndarray],
    draws: Draws,
    groups: np.ndarray | None = None,
) -> None:
    """Values, delta, CI and p-value of every metric of one comparison.

    One set of bootstrap resamples and one set of relabellings of the paired records serves
    all metrics (they stay paired with each other, and the cost is one set of draws). A metric
    only counts its scored pairs: in a resample, its statistic is computed over the pairs drawn
    that it scores (undefined when none is drawn); a relabelling of an unscored pair changes
    nothing (its difference is 0, its statistics are absent on both sides).

    With ``groups``, the draws and relabellings are of conversations, spread to their records;
    each record of a mean metric weighs one over its conversation's paired turns, so that the
    statistic is the mean over conversations of each one's mean difference.
    """
    base_pos, system_pos = positions
    n = len(base_pos) if groups is None else int(groups.max()) + 1
    spread = (lambda w: w) if groups is None else (lambda w: w[:, groups])
    means = [m for m in metrics if not m.corpus]
    corpora = [m for m in metrics if m.corpus]
    masks = np.column_stack([m.kept for m in means]).astype(np.float64) if means else None
    diffs = (np.column_stack([np.where(m.kept, m.system - m.base, 0.0) for m in means])
             if means else None)
    if groups is not None and masks is not None and diffs is not None:
        shares = np.column_stack([_shares(m.kept, groups, n) for m in means])
        masks, diffs = masks * shares, diffs * shares
    # Per corpus metric, statistics read once: each side's, and both (the baseline's records
    # then the system's) for relabellings, which exchange a record's two sides.
    scorers = []
    for metric in corpora:
        db, ds = _details(base, metric, base_pos), _details(system, metric, system_pos)
        scorers.append((corpus_resampler(metric.name, db), corpus_resampler(metric.name, ds),
                        corpus_resampler(metric.name, db + ds)))

    def resampled(drawn: np.ndarray) -> np.ndarray:
        weights = spread(drawn)
        columns = []
        if means:
            with np.errstate(invalid="ignore", divide="ignore"):
                columns.append((weights @ diffs) / (weights @ masks))
        for metric, (base_score, system_score, _) in zip(corpora, scorers, strict=True):
            delta = system_score(weights) - base_score(weights)
            delta[weights @ metric.kept == 0] = np.nan  # none of its scored pairs drawn
            columns.append(delta[:, None])
        return np.hstack(columns)

    def relabelled(swapped: np.ndarray) -> np.ndarray:
        swaps = spread(swapped)
        columns = [] if diffs is None else [(1.0 - 2.0 * swaps) @ diffs]
        if corpora:
            stay, moved = ~swaps, swaps
            as_base, as_system = np.hstack([stay, moved]), np.hstack([moved, stay])
        for _, _, both_score in scorers:
            columns.append((both_score(as_system) - both_score(as_base))[:, None])
        return np.hstack(columns)

    ci = paired_bootstrap(resampled, n, resamples=draws.resamples, seed=draws.seed, level=LEVEL)
    p, exact = randomization_test(relabelled, n, permutations=draws.permutations,
                                  seed=draws.seed)
    for k, metric in enumerate([*means, *corpora]):
        kept = metric.kept
        if metric.corpus:
            base_score, system_score, _ = scorers[k - len(means)]
            base_value, system_value = float(base_score(None)[0]), float(system_score(None)[0])
            delta = system_value - base_value
        else:
            base_value, system_value, delta = paired_means(metric.base, metric.system, kept,
                                                           groups)
        metric.row.update({
            "baseline_value": finite(base_value),
            "system_value": finite(system_value),
            "delta": finite(delta),
            "ci95": [finite(ci[k, 0]), finite(ci[k, 1])],
            "p_value": finite(p[k]),
            "p_method": "exact" if exact else "monte-carlo",
        })


def paired_means(base: np.ndarray, system: np.ndarray, kept: np.ndarray,
                 groups: np.ndarray | None) -> tuple[float, float, float]:
    """The baseline's and the system's mean over the ``kept`` pairs, and the mean of their
    differences, each correctly rounded (:mod:`~rageval.stats.exact`); with ``groups``, means
    over conversations of each one's correctly rounded mean over its paired turns, as the
    runs' summaries and the streamed comparison compute them."""
    differences = system[kept] - base[kept]
    if groups is None:
        return exact_mean(base[kept]), exact_mean(system[kept]), exact_mean(differences)
    count = int(groups.max()) + 1
    scored = np.bincount(groups[kept], minlength=count) > 0
    return tuple(exact_mean(exact_group_means(x, groups[kept], count)[scored])
                 for x in (base[kept], system[kept], differences))  # type: ignore[return-value]


def _shares(kept: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
    """Each kept record's weight within its conversation: one over its kept records."""
    _, sizes = group_sums(np.zeros(len(kept)), kept, groups, count)
    return np.where(kept, 1.0 / np.maximum(sizes[groups], 1), 0.0)


def _details(run: NamedRun, metric: _Metric, positions: np.ndarray) -> list[dict[str, Any] | None]:
    """Each paired record's ``details[name]`` (its sufficient statistics); None where the
    metric is not compared on the record (unscored in either run)."""
    records = run.results.records
    return [record_details(records[position], metric.name, run.name) if keep else None
            for keep, position in zip(metric.kept, positions, strict=True)]


def adjust(rows: list[dict[str, Any]]) -> None:
    """Holm within one comparison: headline rows form one family, components another."""
    for family, headline in (("headline", True), ("components", False)):
        members = [r for r in rows if r["headline"] is headline and r["p_value"] is not None]
        adjusted = holm([r["p_value"] for r in members])
        for row, value in zip(members, adjusted, strict=True):
            row["p_adjusted"] = float(value)
            row["holm_family"] = family


def finite(value: float) -> float | None:
    """JSON has no NaN or infinity: a number that is not finite is reported as missing."""
    value = float(value)
    return value if math.isfinite(value) else None


def signature_diff(baseline: str, system: str) -> dict[str, list[str | None]]:
    """Keys whose values differ between two ``key:value|key:value`` signatures (or exist on one
    side only), each with ``[baseline value, system value]``."""
    ours, theirs = _fields(baseline), _fields(system)
    keys = dict.fromkeys([*ours, *theirs])
    return {k: [ours.get(k), theirs.get(k)] for k in keys
            if ours.get(k) != theirs.get(k) and k not in _INTERVAL_KEYS}


# Fields that say how a run's interval was drawn, not what its value is: a run past the
# records kept whole (ci:poisson) is compared with a shorter one as it is.
_INTERVAL_KEYS = frozenset({"ci"})


def mismatch_kind(diff: dict[str, list[str | None]]) -> str | None:
    """None, ``"rageval-version"`` (only the rageval release differs) or ``"config"``."""
    if not diff:
        return None
    return "rageval-version" if set(diff) == {"rageval"} else "config"


def _fields(signature: str) -> dict[str, str]:
    pairs = (part.partition(":") for part in signature.split("|") if part)
    return {key: value for key, _, value in pairs}
