"""Comparing scoring runs: ``rageval compare DIR_A DIR_B [...] [--baseline DIR]``.

Every system is compared with one baseline on the records both scored (paired by record id).
For each output name present in both runs the comparison reports both values, the delta
(system minus baseline), a paired bootstrap CI of the delta, a paired randomization test, a Holm
adjustment across the metrics of the comparison, wins/ties/losses, and whether the two numbers
were produced under the same signature. The statistics (all seeded, never a global RNG):

- **Pairing.** Records are matched by id. Ids missing from a run are an error that names them,
  unless ``intersect`` is set: then the ids common to *all* runs are compared and the number each
  run lost is reported. Within a metric, a record unscored (NaN) in either run is left out of
  that metric only, and counted (``n_dropped``); values, delta and tests use the ``n`` pairs left,
  so a value can differ from the run's summary when records were left out.
- **CI.** 95% percentile bootstrap of the delta: the paired records are resampled jointly for
  both systems (``resamples`` draws, those of :func:`rageval.compare.stats.bootstrap_ci` with
  the same seed), once for all metrics of the comparison. In a resample, a metric's delta is
  computed over the drawn pairs it scores (resamples that draw none of them are left out of its
  quantiles); for a metric scored on every pair this is exactly ``bootstrap_ci`` of the
  per-record differences.
- **p-value.** Two-sided paired randomization test: each record's two values are swapped between
  the systems at random (for a mean: the sign of its difference is flipped), ``permutations``
  times; p is the share of relabellings at least as extreme as observed, with the
  ``(count + 1) / (permutations + 1)`` convention, or by exact enumeration of all ``2**n``
  relabellings when ``2**n <= permutations`` (then ``count / 2**n``; n counts the paired
  records: relabelling an unscored pair changes nothing, so the test stays exact for a metric
  scored on fewer). ``p_method`` says which. The relabellings are shared by all metrics.
- **Corpus metrics** (``aggregate == "corpus"``: corpus BLEU) are recomputed from the per-record
  sufficient statistics in ``details`` for each resample and each relabelling, on both sides;
  the statistic is the difference of the two corpus figures. Their wins/ties/losses compare the
  per-record (sentence) values.
- **Holm** adjusts within one comparison (one baseline-system pair) and within one family:
  the headline rows (the metrics a summary table shows by default) form one family, the
  component rows (``rouge2.precision``, ``bleu.p1`` ...) another. Showing or adding components
  therefore never changes a headline's adjusted p-value, and the default table shows exactly
  the headline family. ``holm_family`` on each row says which.
- **Signatures.** A metric whose signature differs between the two runs is still compared but
  flagged: ``signature_mismatch`` is ``"config"`` when any field other than the rageval version
  differs (tokenizer, model, prompt hash, a library version ...: the numbers may not be
  comparable), ``"rageval-version"`` when only the ``rageval`` field differs (a milder note:
  comparable unless that release changed the metric), None when equal; ``signature_diff`` maps
  each differing key to ``[baseline value, system value]``.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rageval.compare.stats import holm, paired_bootstrap, randomization_test
from rageval.core.errors import InputError, UsageError
from rageval.core.files import atomic_write
from rageval.core.results import Results
from rageval.generation.bleu import corpus_bleu_scorer

LEVEL = 0.95
# Significance marks on Holm-adjusted p-values, strictest first.
MARKS = ((0.01, "**"), (0.05, "*"))
# How many missing ids an error message spells out before giving the count only.
_SHOWN_IDS = 5

RunLike = str | os.PathLike[str] | Results


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
        }


@dataclass(frozen=True)
class _Run:
    name: str
    results: Results


# ---- public API -------------------------------------------------------------------------


def compare_runs(
    run_dirs: Sequence[RunLike],
    *,
    baseline: RunLike | None = None,
    names: Sequence[str] | None = None,
    intersect: bool = False,
    resamples: int = 10_000,
    permutations: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """Compare every run with the baseline (default: the first run), metric by metric.

    ``run_dirs`` are directories written by ``rageval score --out DIR`` (or loaded
    :class:`Results`; ``names`` then labels them, default ``run1``, ``run2`` ...). A run is named
    by its path as given. ``baseline`` may be one of the runs or an extra one. Raises
    :class:`InputError` when record ids do not pair (without ``intersect``) and
    :class:`UsageError` for bad arguments.
    """
    _check_settings(resamples, permutations, seed)
    runs = _load_runs(run_dirs, names)
    base, systems = _pick_baseline(runs, baseline)
    ids, positions, dropped = _pair_ids([base, *systems], intersect)
    rows: list[dict[str, Any]] = []
    not_compared: dict[str, dict[str, list[str]]] = {}
    for system in systems:
        pair_rows, missing = _compare_pair(
            base, system, positions[base.name], positions[system.name],
            resamples=resamples, permutations=permutations, seed=seed,
        )
        rows += pair_rows
        if missing["baseline_only"] or missing["system_only"]:
            not_compared[system.name] = missing
    settings = {
        "level": LEVEL,
        "resamples": resamples,
        "permutations": permutations,
        "seed": seed,
        "ci": "paired percentile bootstrap of the delta (records resampled jointly)",
        "test": "two-sided paired randomization test (per-record swaps / sign flips)",
        "p_value": "(count + 1) / (permutations + 1); exact enumeration when "
                   "2**n <= permutations",
        "holm": "per comparison; headline rows and component rows are separate families",
        "intersect": intersect,
    }
    return Comparison(base.name, tuple(s.name for s in systems), rows, dropped, len(ids),
                      settings, not_compared)


def render_comparison(comparison: Comparison, console: Console, *,
                      components: bool = False) -> None:
    """One table per baseline-system comparison, then the notes a reader needs to trust it:
    signature mismatches, records left out, metrics not compared, what the marks mean."""
    for system in comparison.systems:
        rows = [r for r in comparison.rows_for(system) if r["headline"] or components]
        console.print(comparison_table(comparison, system, rows))
        for line, style in _notes(comparison, system, rows):
            console.print(line, style=style, markup=False, highlight=False)
    dropped = {k: v for k, v in comparison.dropped.items() if v}
    if dropped:
        text = ", ".join(f"{name}: {count}" for name, count in dropped.items())
        console.print(f"records dropped by --intersect (ids not in every run): {text}",
                      style="yellow", markup=False, highlight=False)
    for line in _legend(comparison):
        console.print(line, markup=False, highlight=False)


def run_compare(
    dirs: Sequence[str],
    baseline: str | None,
    json_path: str | None,
    intersect: bool,
    resamples: int,
    permutations: int,
    seed: int,
    components: bool,
    out: TextIO,
) -> int:
    """The ``rageval compare`` command: compare, write ``--json`` atomically, print tables."""
    comparison = compare_runs(dirs, baseline=baseline, intersect=intersect,
                              resamples=resamples, permutations=permutations, seed=seed)
    console = _console(out)
    render_comparison(comparison, console, components=components)
    if json_path:
        write_json(comparison, json_path)
        console.print(f"wrote {json_path}", markup=False, highlight=False)
    return 0


def json_rows(comparison: Comparison) -> list[dict[str, Any]]:
    """What ``--json`` writes: a list of rows, one per (system, metric), each carrying the
    settings that reproduce its statistics (resamples, permutations, seed, level)."""
    keep = ("level", "resamples", "permutations", "seed", "intersect")
    settings = {key: comparison.settings[key] for key in keep}
    counts = {"records_paired": comparison.n_records,
              "records_dropped": dict(comparison.dropped)}
    return [{**row, **counts, **settings} for row in comparison.rows]


def write_json(comparison: Comparison, path: str | os.PathLike[str]) -> None:
    """Write the comparison's rows as a JSON list; a crash never leaves a torn file."""
    target = Path(path)
    text = json.dumps(json_rows(comparison), indent=2, ensure_ascii=False, allow_nan=False)
    try:
        atomic_write(target, text + "\n")
    except OSError as err:
        raise UsageError(f"--json {path}: cannot write: {err}") from None


def comparison_table(comparison: Comparison, system: str,
                     rows: Sequence[dict[str, Any]]) -> Table:
    """The table of one comparison (rows already filtered)."""
    title = (f"{system} vs baseline {comparison.baseline} "
             f"({comparison.n_records} paired records)")
    # Text, not markup: paths and metric names may hold brackets ("p(rel=2)@5", "run[1]").
    table = Table(title=Text(title), title_justify="left")
    table.add_column("metric", style="bold")
    for label in ("baseline", "system", "delta", f"{LEVEL:.0%} CI", "p", "p_adj", "W/T/L",
                  "n"):
        table.add_column(label, justify="right")
    table.add_column("signature")
    for row in rows:
        ci = row["ci95"]
        cells = (
            row["metric"] + (" (corpus)" if row["aggregate"] == "corpus" else ""),
            _fmt(row["baseline_value"]),
            _fmt(row["system_value"]),
            _fmt(row["delta"], signed=True),
            "—" if ci is None else f"[{_fmt(ci[0], signed=True)}, {_fmt(ci[1], signed=True)}]",
            _fmt_p(row["p_value"]),
            _fmt_p(row["p_adjusted"]) + significance_mark(row["p_adjusted"]),
            f"{row['wins']}/{row['ties']}/{row['losses']}",
            str(row["n"]) + (f" (-{row['n_dropped']})" if row["n_dropped"] else ""),
            {None: "same", "rageval-version": "rageval version differs",
             "config": "DIFFERS"}[row["signature_mismatch"]],
        )
        table.add_row(*(Text(cell) for cell in cells))
    return table


def significance_mark(p_adjusted: float | None) -> str:
    """``**`` below 0.01, ``*`` below 0.05, else nothing (on Holm-adjusted p-values)."""
    if p_adjusted is None:
        return ""
    return next((mark for bound, mark in MARKS if p_adjusted < bound), "")


def signature_diff(baseline: str, system: str) -> dict[str, list[str | None]]:
    """Keys whose values differ between two ``key:value|key:value`` signatures (or exist on one
    side only), each with ``[baseline value, system value]``."""
    ours, theirs = _fields(baseline), _fields(system)
    keys = dict.fromkeys([*ours, *theirs])
    return {k: [ours.get(k), theirs.get(k)] for k in keys if ours.get(k) != theirs.get(k)}


def mismatch_kind(diff: dict[str, list[str | None]]) -> str | None:
    """None, ``"rageval-version"`` (only the rageval release differs) or ``"config"``."""
    if not diff:
        return None
    return "rageval-version" if set(diff) == {"rageval"} else "config"


# ---- loading and pairing ----------------------------------------------------------------


def _check_settings(resamples: int, permutations: int, seed: int) -> None:
    for name, value, low in (("resamples", resamples, 1), ("permutations", permutations, 1),
                             ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UsageError(f"{name} must be an integer of at least {low}, got {value!r}")


def _load_runs(runs: Sequence[RunLike], names: Sequence[str] | None) -> list[_Run]:
    if names is not None and len(names) != len(runs):
        raise UsageError(f"{len(names)} names given for {len(runs)} runs")
    loaded = []
    for i, run in enumerate(runs):
        if isinstance(run, Results):
            loaded.append(_Run(names[i] if names else f"run{i + 1}", run))
        else:
            loaded.append(_Run(names[i] if names else os.fspath(run), Results.load(run)))
    seen: dict[str, str] = {}
    for run, given in zip(loaded, runs, strict=True):
        # The same directory spelled two ways ("a" and "a/") is the same run.
        key = run.name if isinstance(given, Results) else os.path.realpath(given)
        if key in seen or run.name in seen.values():
            raise UsageError(f"run {run.name} is given twice")
        seen[key] = run.name
    return loaded


def _pick_baseline(runs: list[_Run], baseline: RunLike | None) -> tuple[_Run, list[_Run]]:
    """The baseline (default the first run; an extra run when not among them) and the rest."""
    index = 0 if baseline is None else _find(runs, baseline)
    if index is not None:
        base, systems = runs[index], runs[:index] + runs[index + 1 :]
    elif isinstance(baseline, Results):
        base, systems = _Run("baseline", baseline), runs
    else:
        path = os.fspath(baseline)  # type: ignore[arg-type]  # None always finds index 0
        base, systems = _Run(path, Results.load(path)), runs
    if base.name in {r.name for r in systems}:
        raise UsageError(f"run {base.name} is given twice")
    if not systems:
        raise UsageError("compare needs at least two runs: a baseline and a system")
    return base, systems


def _find(runs: list[_Run], baseline: RunLike) -> int | None:
    if isinstance(baseline, Results):
        return next((i for i, r in enumerate(runs) if r.results is baseline), None)
    given = os.fspath(baseline)
    for i, run in enumerate(runs):
        if run.name == given:
            return i
    target = Path(given).resolve()
    return next((i for i, r in enumerate(runs) if Path(r.name).resolve() == target), None)


def _pair_ids(
    runs: list[_Run], intersect: bool
) -> tuple[list[str], dict[str, np.ndarray], dict[str, int]]:
    """Ids in the baseline's order, each run's positions of them, and records each run lost."""
    id_lists = {run.name: [r.id for r in run.results.records] for run in runs}
    for run in runs:
        _check_unique(run.name, id_lists[run.name])
    base_ids = id_lists[runs[0].name]
    sets = {name: set(ids) for name, ids in id_lists.items()}
    common = set.intersection(*sets.values())
    if not intersect:
        problems = _pairing_problems(runs[0].name, sets)
        if problems:
            raise InputError("records do not pair by id: " + "; ".join(problems)
                             + " (use --intersect to compare the ids common to all runs)")
    ids = [i for i in base_ids if i in common]
    if not ids:
        raise InputError("no record id is common to all runs: nothing to compare")
    positions = {}
    for name, run_ids in id_lists.items():
        where = {record_id: k for k, record_id in enumerate(run_ids)}
        positions[name] = np.array([where[i] for i in ids], dtype=np.int64)
    dropped = {name: len(run_ids) - len(ids) for name, run_ids in id_lists.items()}
    return ids, positions, dropped


def _check_unique(name: str, ids: list[str]) -> None:
    repeated = [i for i, count in Counter(ids).items() if count > 1]
    if repeated:
        raise InputError(f"record ids must be unique to pair records; repeated: "
                         f"{_some(repeated)}", path=name)


def _pairing_problems(base_name: str, sets: dict[str, set[str]]) -> list[str]:
    base = sets[base_name]
    problems = []
    for name, ids in sets.items():
        if name == base_name:
            continue
        if base - ids:
            problems.append(f"{name} lacks {_some(sorted(base - ids))} (in {base_name})")
        if ids - base:
            problems.append(f"{base_name} lacks {_some(sorted(ids - base))} (in {name})")
    return problems


def _some(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:_SHOWN_IDS])
    more = f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else ""
    return f"{len(ids)} id{'s' if len(ids) != 1 else ''} ({shown}{more})"


# ---- one comparison ---------------------------------------------------------------------


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


def _compare_pair(
    base: _Run,
    system: _Run,
    base_pos: np.ndarray,
    system_pos: np.ndarray,
    *,
    resamples: int,
    permutations: int,
    seed: int,
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    bsum, ssum = base.results.summary, system.results.summary
    missing = {"baseline_only": [n for n in bsum if n not in ssum],
               "system_only": [n for n in ssum if n not in bsum]}
    metrics = []
    for name in (n for n in bsum if n in ssum):
        b = _column(base.results, name)[base_pos]
        s = _column(system.results, name)[system_pos]
        corpus = bsum[name].aggregate == "corpus" and ssum[name].aggregate == "corpus"
        metrics.append(_Metric(name, b, s, corpus, _row_head(name, base, system, b, s, corpus)))
    tested = [m for m in metrics if m.row["n"] > 0]
    if tested:
        _measure(tested, base, system, base_pos, system_pos, resamples, permutations, seed)
    rows = [m.row for m in metrics]
    _adjust(rows)
    return rows, missing


def _row_head(name: str, base: _Run, system: _Run, b: np.ndarray, s: np.ndarray,
              corpus: bool) -> dict[str, Any]:
    """The row's identity, counts and signature check (the statistics come from _measure)."""
    diff = signature_diff(base.results.summary[name].signature,
                          system.results.summary[name].signature)
    kept = ~(np.isnan(b) | np.isnan(s))
    bk, sk = b[kept], s[kept]
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
        "wins": int((sk > bk).sum()),
        "ties": int((sk == bk).sum()),
        "losses": int((sk < bk).sum()),
        "n": int(kept.sum()),
        "n_dropped": int((~kept).sum()),
        "headline": bool(base.results.summary[name].in_table),
        "aggregate": "corpus" if corpus else "mean",
        "p_method": None,
        "holm_family": None,
        "signature_mismatch": mismatch_kind(diff),
        "signature_diff": diff,
    }


def _measure(
    metrics: list[_Metric],
    base: _Run,
    system: _Run,
    base_pos: np.ndarray,
    system_pos: np.ndarray,
    resamples: int,
    permutations: int,
    seed: int,
) -> None:
    """Values, delta, CI and p-value of every metric of one comparison.

    One set of bootstrap resamples and one set of relabellings of the paired records serves
    all metrics (they stay paired with each other, and the cost is one set of draws). A metric
    only counts its scored pairs: in a resample, its statistic is computed over the pairs drawn
    that it scores (undefined when none is drawn); a relabelling of an unscored pair changes
    nothing (its difference is 0, its statistics are absent on both sides).
    """
    n = len(base_pos)
    means = [m for m in metrics if not m.corpus]
    corpora = [m for m in metrics if m.corpus]
    masks = np.column_stack([m.kept for m in means]).astype(np.float64) if means else None
    diffs = (np.column_stack([np.where(m.kept, m.system - m.base, 0.0) for m in means])
             if means else None)
    # Per corpus metric, statistics read once: each side's, and both (the baseline's records
    # then the system's) for relabellings, which exchange a record's two sides.
    scorers = []
    for metric in corpora:
        db, ds = _details(base, metric, base_pos), _details(system, metric, system_pos)
        scorers.append((corpus_bleu_scorer(db, metric=metric.name),
                        corpus_bleu_scorer(ds, metric=metric.name),
                        corpus_bleu_scorer(db + ds, metric=metric.name)))

    def resampled(weights: np.ndarray) -> np.ndarray:
        columns = []
        if means:
            with np.errstate(invalid="ignore", divide="ignore"):
                columns.append((weights @ diffs) / (weights @ masks))
        for metric, (base_score, system_score, _) in zip(corpora, scorers, strict=True):
            delta = system_score(weights) - base_score(weights)
            delta[weights @ metric.kept == 0] = np.nan  # none of its scored pairs drawn
            columns.append(delta[:, None])
        return np.hstack(columns)

    def relabelled(swaps: np.ndarray) -> np.ndarray:
        columns = [] if diffs is None else [(1.0 - 2.0 * swaps) @ diffs]
        if corpora:
            stay, moved = ~swaps, swaps
            as_base, as_system = np.hstack([stay, moved]), np.hstack([moved, stay])
        for _, _, both_score in scorers:
            columns.append((both_score(as_system) - both_score(as_base))[:, None])
        return np.hstack(columns)

    ci = paired_bootstrap(resampled, n, resamples=resamples, seed=seed, level=LEVEL)
    p, exact = randomization_test(relabelled, n, permutations=permutations, seed=seed)
    sums = np.zeros(0) if diffs is None else diffs.sum(axis=0)
    for k, metric in enumerate([*means, *corpora]):
        kept = metric.kept
        if metric.corpus:
            base_score, system_score, _ = scorers[k - len(means)]
            base_value, system_value = float(base_score(None)[0]), float(system_score(None)[0])
            delta = system_value - base_value
        else:
            base_value = float(metric.base[kept].mean())
            system_value = float(metric.system[kept].mean())
            # The mean of the differences: the statistic resampled and tested (the difference
            # of the two means may differ from it in the last bit).
            delta = float(sums[k]) / int(kept.sum())
        metric.row.update({
            "baseline_value": _finite(base_value),
            "system_value": _finite(system_value),
            "delta": _finite(delta),
            "ci95": [_finite(ci[k, 0]), _finite(ci[k, 1])],
            "p_value": _finite(p[k]),
            "p_method": "exact" if exact else "monte-carlo",
        })


def _details(run: _Run, metric: _Metric, positions: np.ndarray) -> list[dict[str, Any] | None]:
    """Each paired record's ``details[name]`` (its sufficient statistics); None where the
    metric is not compared on the record (unscored in either run)."""
    records = run.results.records
    out: list[dict[str, Any] | None] = []
    for keep, position in zip(metric.kept, positions, strict=True):
        if not keep:
            out.append(None)
            continue
        detail = records[position].details.get(metric.name)
        if not isinstance(detail, dict):
            raise InputError(f"record {records[position].id!r} has a {metric.name} value but "
                             f"no details to recompute the corpus figure from", path=run.name)
        out.append(detail)
    return out


def _column(results: Results, name: str) -> np.ndarray:
    """Per-record values of one output name, NaN where unscored (or absent)."""
    values = (r.scores.get(name) for r in results.records)
    return np.fromiter((math.nan if v is None else v for v in values), dtype=np.float64,
                       count=len(results.records))


def _adjust(rows: list[dict[str, Any]]) -> None:
    """Holm within one comparison: headline rows form one family, components another."""
    for family, headline in (("headline", True), ("components", False)):
        members = [r for r in rows if r["headline"] is headline and r["p_value"] is not None]
        adjusted = holm([r["p_value"] for r in members])
        for row, value in zip(members, adjusted, strict=True):
            row["p_adjusted"] = float(value)
            row["holm_family"] = family


def _finite(value: float) -> float | None:
    """JSON has no NaN or infinity: a number that is not finite is reported as missing."""
    value = float(value)
    return value if math.isfinite(value) else None


def _fields(signature: str) -> dict[str, str]:
    pairs = (part.partition(":") for part in signature.split("|") if part)
    return {key: value for key, _, value in pairs}


# ---- presentation -----------------------------------------------------------------------


def _notes(comparison: Comparison, system: str,
           rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
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
    missing = comparison.not_compared.get(system, {})
    for key, where in (("baseline_only", comparison.baseline), ("system_only", system)):
        if missing.get(key):
            lines.append((f"only in {where}, not compared: {', '.join(missing[key])}",
                          "yellow"))
    return lines


def _legend(comparison: Comparison) -> list[str]:
    settings = comparison.settings
    methods = {r["p_method"] for r in comparison.rows} - {None}
    test = ("exact, all relabellings enumerated" if methods == {"exact"}
            else f"{settings['permutations']} random relabellings")
    return [
        "* p_adj < 0.05, ** p_adj < 0.01 (Holm within each comparison, headline and component "
        "rows as separate families)",
        f"p: two-sided paired randomization test ({test}); CI: paired percentile bootstrap "
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


def _fmt_p(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if value >= 0.001 else f"{value:.1e}"


def _console(out: TextIO) -> Console:
    # As `rageval score`: a file or pipe gets a wide, plain table; a terminal its own width.
    is_tty = hasattr(out, "isatty") and out.isatty()
    return Console(file=out, width=None if is_tty else 160, no_color=not is_tty,
                   highlight=False)


__all__ = [
    "Comparison",
    "compare_runs",
    "comparison_table",
    "mismatch_kind",
    "render_comparison",
    "run_compare",
    "signature_diff",
    "significance_mark",
    "write_json",
]
