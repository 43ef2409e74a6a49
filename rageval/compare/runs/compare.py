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
  both systems (``resamples`` draws, those of :func:`rageval.stats.resampling.bootstrap_ci` with
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
- **Conversations.** Runs of conversations pair turns by conversation and position, and a
  conversation's own line by its id. A mean metric's value, delta and counts are then over
  conversations (each the mean of its paired turns), as the runs' summaries are, and the
  bootstrap and the relabellings take conversations whole. ``per_turn`` adds, for each turn
  position, the paired difference over the conversations that reach it
  (:mod:`~rageval.compare.runs.turns`).
- **Signatures.** A metric whose signature differs between the two runs is still compared but
  flagged: ``signature_mismatch`` is ``"config"`` when any field other than the rageval version
  differs (tokenizer, model, prompt hash, a library version ...: the numbers may not be
  comparable), ``"rageval-version"`` when only the ``rageval`` field differs (a milder note:
  comparable unless that release changed the metric), None when equal; ``signature_diff`` maps
  each differing key to ``[baseline value, system value]``.

- **Runs too long to hold** (past :data:`~rageval.stats.poisson.EXACT_RECORDS` records, or
  ``ci="poisson"``) are streamed from disk (:mod:`~rageval.compare.runs.streamed`): the same
  values, deltas and counts, with a paired Poisson bootstrap and a randomization test whose
  weights and signs are derived from (seed, each unit's id, draw), in running sums.

Both ways share one pairing (:mod:`~rageval.compare.runs.pairing`: its rules and messages, and
the blocks of pairs a comparison reads: one block for runs held in memory, a block per
partition and few thousand units for runs streamed), one :class:`Draws` (resamples,
permutations, seed), and correctly rounded means (:mod:`rageval.stats.exact`): their values,
deltas and counts agree to the last bit.

This module holds the entry points (:func:`compare_runs`; :func:`run_compare` and
:func:`compare_command`, the command that prints and writes it). Loading and
pairing the runs is in :mod:`~rageval.compare.runs.pairing`, the statistics of a comparison in
:mod:`~rageval.compare.runs.statistics`, its tables and JSON rows in
:mod:`~rageval.compare.runs.output`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, TextIO

from rageval.compare.command_output import console_for
from rageval.compare.runs.calibrated import RunLabels, add_calibrated
from rageval.compare.runs.output import (
    MARKS,
    comparison_table,
    json_rows,
    render_comparison,
    significance_mark,
    write_json,
)
from rageval.compare.runs.pairing import (
    NamedRun,
    RunLike,
    conversation_groups,
    load_runs,
    pair_record_ids,
    pick_baseline,
    whole_block,
)
from rageval.compare.runs.statistics import (
    LEVEL,
    Comparison,
    Draws,
    compare_pair,
    mismatch_kind,
    signature_diff,
)
from rageval.compare.runs.streamed import compare_streamed
from rageval.compare.runs.turns import per_turn_rows
from rageval.core.errors import UsageError
from rageval.core.outputs.text import terminal
from rageval.stats.poisson import EXACT_RECORDS

__all__ = [
    "CI_METHODS",
    "LEVEL",
    "MARKS",
    "Comparison",
    "Draws",
    "RunLike",
    "compare_command",
    "compare_runs",
    "comparison_table",
    "json_rows",
    "mismatch_kind",
    "render_comparison",
    "run_compare",
    "signature_diff",
    "significance_mark",
    "write_json",
]


#: How a comparison's intervals and tests are drawn: resampling the paired records (exact, for
#: runs up to rageval.stats.poisson.EXACT_RECORDS records; past them, as "poisson"), or
#: running sums streamed from disk with each record's weights and signs derived from its id.
CI_METHODS = ("records", "poisson")


def compare_runs(
    run_dirs: Sequence[RunLike],
    *,
    baseline: RunLike | None = None,
    names: Sequence[str] | None = None,
    intersect: bool = False,
    resamples: int = 10_000,
    permutations: int = 10_000,
    seed: int = 0,
    human: str | None = None,
    ci: str = "records",
) -> Comparison:
    """Compare every run with the baseline (default: the first run), metric by metric.

    ``run_dirs`` are directories written by ``rageval score --out DIR`` (or loaded
    :class:`Results`; ``names`` then labels them, default ``run1``, ``run2`` ...). A run is named
    by its path as given. ``baseline`` may be one of the runs or an extra one. ``human`` names
    the field of human labels in the records files the runs scored: each rubric judge row then
    gains a ``calibrated`` difference (:mod:`~rageval.compare.runs.calibrated`). ``ci`` is
    ``"records"`` (resample the paired records; runs past ``EXACT_RECORDS`` records are
    streamed) or ``"poisson"`` (streamed from disk with running sums, whatever the size). Raises
    :class:`InputError` when record ids do not pair (without ``intersect``) and
    :class:`UsageError` for bad arguments.
    """
    draws = Draws(resamples, permutations, seed).check()
    if ci not in CI_METHODS:
        raise UsageError(f"ci must be one of {', '.join(CI_METHODS)}, got {ci!r}")
    runs = load_runs(run_dirs, names)
    base, systems = pick_baseline(runs, baseline)
    if ci == "poisson" or any(len(r.results.records) > EXACT_RECORDS for r in [base, *systems]):
        return _streamed(base, systems, intersect, draws, human)
    base, systems = base.whole(), [system.whole() for system in systems]
    ids, positions, dropped = pair_record_ids([base, *systems], intersect)
    labels = ({run.name: RunLabels(run, human) for run in [base, *systems]}
              if human is not None else None)
    rows: list[dict[str, Any]] = []
    turn_rows: list[dict[str, Any]] = []
    not_compared: dict[str, dict[str, list[str]]] = {}
    threads = conversation_groups(base.results.records, positions[base.name])
    for system in systems:
        names = [n for n in base.results.summary if n in system.results.summary]
        block = whole_block(base, system, names, (positions[base.name],
                            positions[system.name]), threads, ids=labels is not None)
        pair_rows, missing = compare_pair(base, system, block, draws)
        if threads is not None:
            turn_rows += per_turn_rows(base, system, block, draws)
        if labels is not None:
            add_calibrated(pair_rows, block, labels[base.name], labels[system.name])
        rows += pair_rows
        if missing["baseline_only"] or missing["system_only"]:
            not_compared[system.name] = missing
    settings = _settings(draws, intersect, human,
                         conversations=threads is not None, streamed=False)
    return Comparison(base.name, tuple(s.name for s in systems), rows, dropped, len(ids),
                      settings, not_compared, turn_rows)


def _streamed(base: NamedRun, systems: list[NamedRun], intersect: bool,
              draws: Draws, human: str | None) -> Comparison:
    """The comparison streamed from disk, with running sums (:mod:`.streamed`)."""
    labels = ({run.name: RunLabels(run, human) for run in [base, *systems]}
              if human is not None else None)
    found = compare_streamed(base, systems, intersect=intersect, draws=draws, labels=labels)
    settings = _settings(draws, intersect, human, conversations=found.conversations,
                         streamed=True)
    return Comparison(base.name, tuple(s.name for s in systems), found.rows, found.dropped,
                      found.paired, settings, found.not_compared, found.per_turn)


def _settings(draws: Draws, intersect: bool, human: str | None, *,
              conversations: bool, streamed: bool) -> dict[str, Any]:
    """How a comparison was drawn, as its JSON reports it."""
    unit = "conversation" if conversations else "record"
    if streamed:
        ci = (f"paired Poisson bootstrap of the delta (running sums; each {unit}'s weights "
              "from the seed and its id)")
        test = (f"two-sided paired randomization test (each {unit}'s sign flips from the "
                "seed and its id)")
        p_value = "(count + 1) / (permutations + 1)"
    else:
        ci = ("paired percentile bootstrap of the delta "
              + ("(conversations resampled)" if conversations else "(records resampled jointly)"))
        test = "two-sided paired randomization test (per-record swaps / sign flips)"
        p_value = "(count + 1) / (permutations + 1); exact enumeration when 2**n <= permutations"
    settings: dict[str, Any] = {
        "level": LEVEL, **draws.settings(),
        "ci": ci, "test": test, "p_value": p_value,
        "holm": "per comparison; headline rows and component rows are separate families",
        "intersect": intersect,
    }
    if streamed:
        settings["method"] = "poisson"
    if conversations:
        settings["unit"] = ("conversation: turns paired by conversation and position; each "
                            "conversation's value the mean of its paired turns; conversations "
                            f"{'weighed' if streamed else 'resampled'} and relabelled whole")
    if human is not None:
        settings["calibrated"] = ("PPI on the paired differences, human labels in field "
                                  f"{human!r} of each run's records")
    return settings


def run_compare(dirs: Sequence[str], *, draws: Draws, out: TextIO, baseline: str | None = None,
                json_path: str | None = None, intersect: bool = False,
                components: bool = False, human: str | None = None,
                ci: str = "records") -> int:
    """The ``rageval compare`` command: compare, write ``--json`` atomically, print tables."""
    comparison = compare_runs(dirs, baseline=baseline, intersect=intersect,
                              resamples=draws.resamples, permutations=draws.permutations,
                              seed=draws.seed, human=human, ci=ci)
    console = console_for(out)
    render_comparison(comparison, console, components=components)
    if json_path:
        write_json(comparison, json_path)
        console.print(terminal(f"wrote {json_path}"), markup=False, highlight=False)
    return 0


def compare_command(args: argparse.Namespace, out: TextIO) -> int:
    """``rageval compare`` from its parsed arguments (the parser's handler)."""
    return run_compare(args.runs, draws=Draws(args.resamples, args.permutations, args.seed),
                       out=out, baseline=args.baseline, json_path=args.json,
                       intersect=args.intersect, components=args.components, human=args.human,
                       ci=args.ci)
