"""A qrels and a run evaluated on the selected measures, as trec_eval 10.0 does.

The files are read (and a ``-Z`` file), the stops trec_eval would meet are found
(:mod:`.stops`), each topic is scored (:mod:`.per_topic`; by judgment group with ``-R qrels_jg``,
:mod:`.judgment_groups`), turned into z-scores with ``-Z`` (:mod:`.zscores`) and summarised.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import polars as pl

from rageval.core.errors import InputError, RagevalError
from rageval.retrieval.ranking import Ranking, fast_allocation
from rageval.retrieval.ranking.trec_grades import DuplicateDocument
from rageval.retrieval.trec import QidLayout, Qrels, Run, read_qrels, read_qrels_jg, read_run
from rageval.retrieval.trec.chunked_read import NotStreamable, RunSlices
from rageval.retrieval.trec_eval import judgment_groups as groups
from rageval.retrieval.trec_eval import stops
from rageval.retrieval.trec_eval.catalogue import MeasureContext
from rageval.retrieval.trec_eval.options import Options, start_slices
from rageval.retrieval.trec_eval.per_topic import (
    MeasureResult,
    clear_stand_ins,
    judged_only,
    summarize,
    topic_values,
    with_stand_ins,
)
from rageval.retrieval.trec_eval.selection import SelectedMeasure, select_measures
from rageval.retrieval.trec_eval.stops import NoTopicEvaluated, TopicStop
from rageval.retrieval.trec_eval.streaming import streamed_values
from rageval.retrieval.trec_eval.zscores import ZScores, read_zscores, to_zscores

__all__ = ["MeasureResult", "Options", "TopicStop", "evaluate_files", "run_evaluation"]

# The topics evaluated (strcmp order) and each selected measure's values.
Evaluated = tuple[tuple[str, ...], list[MeasureResult]]


def run_evaluation(
    qrels_path: str, run_path: str, specs: Sequence[str], opts: Options,
    started: RunSlices | None = None,
) -> Evaluated:
    """Read the files and evaluate the measures of ``specs`` (``-m`` syntax) under ``opts``.

    ``started``: the run's slices as :func:`~.options.start_slices` gave them to a caller that
    started reading the run earlier; they are started here otherwise."""
    with fast_allocation():
        return _run_inner(qrels_path, run_path, specs, opts, started)


def _run_inner(qrels_path: str, run_path: str, specs: Sequence[str], opts: Options,
               started: RunSlices | None) -> Evaluated:
    # The run is read in worker threads while the qrels are.
    slices = started if started is not None else start_slices(run_path, opts)
    try:
        if opts.rel_format == "qrels_jg":
            qrels = read_qrels_jg(qrels_path)
        else:
            qrels = read_qrels(qrels_path, like_trec_eval=opts.like_trec_eval_10)
    except BaseException:
        if slices is not None:
            slices.close()
        raise
    streamed = _streamed(qrels, slices, specs, opts) if slices is not None else None
    if streamed is not None:
        return streamed
    run = read_run(run_path, like_trec_eval=opts.like_trec_eval_10)
    zscores = read_zscores(opts.zscores_path) if opts.zscores_path is not None else None
    selected = select_measures(specs)  # parameters are checked after reading, as trec_eval
    if not opts.like_trec_eval_10:
        return _evaluate_pair(qrels, run, selected, opts, zscores)
    stop = _first_stop(qrels, run, selected, opts)
    try:
        if stop is None:
            return _evaluate_pair(qrels, run, selected, opts, zscores)
        _evaluate_pair(qrels, run, [], opts, None)  # a duplicate may come first
    except DuplicateDocument as dup:
        # trec_eval meets the duplicate when it evaluates that topic, unless it stopped earlier.
        qid = groups.topic_of(dup.qid)
        found = TopicStop(f"{dup}: trec_eval 10.0 stops there with exit status 4", qid)
        stop = found.earlier(stop)
    except InputError:
        if stop is None:  # no topic in common: trec_eval stops at the first one it lacks
            raise
    assert stop is not None
    if opts.query_flag and opts.only_qid is None:
        stop.partial = _topics_before(stop.qid, qrels, run, selected, opts, zscores)
    raise stop


def _streamed(qrels: Qrels, run: RunSlices | str, specs: Sequence[str],
              opts: Options) -> Evaluated | None:
    """The run (its slices, or its path) read and evaluated a slice of topics at a time, so
    that a big run is never resident as a whole; None where that cannot give the whole-file
    result (the caller then reads the whole file: any error, stop or warning comes from there,
    in trec_eval's order)."""
    slices = start_slices(run, opts) if isinstance(run, str) else run
    if slices is None:
        return None
    run_path = slices.path
    try:
        zscores = read_zscores(opts.zscores_path) if opts.zscores_path is not None else None
        selected = select_measures(specs)
        ctx = MeasureContext(rel_level=opts.rel_level, num_docs=opts.num_docs)
        qids, results = streamed_values(
            qrels, slices, selected, ctx, max_retrieved=opts.max_retrieved,
            all_queries=opts.all_queries, judged=opts.judged_only)
        if not slices.names:  # a run without results: the whole-file reader refuses it
            return None
        if opts.like_trec_eval_10:
            names = Run(pl.DataFrame(), slices.runid, run_path,
                        _cache={"qids": QidLayout(sorted(slices.names))})
            if _first_stop(qrels, names, selected, opts) is not None:
                return None
    except (NotStreamable, RagevalError, OSError):
        return None
    finally:
        slices.close()  # (a no-op once iterated)
    missing = set(qrels.qids()) - slices.names if opts.all_queries else set()
    return _finish(qids, results, missing, qrels, slices.runid, opts, zscores)


def _first_stop(qrels: Qrels, run: Run, selected: Sequence[SelectedMeasure],
                opts: Options) -> TopicStop | None:
    """The first stop trec_eval meets before any duplicate document (or None)."""
    if opts.only_qid is not None and opts.only_qid not in qrels.qids():
        raise NoTopicEvaluated(f"-D names topic '{opts.only_qid}', which the qrels do not "
                               "judge: trec_eval 10.0 evaluates no topic and exits with 7")
    first = stops.first_evaluated(qrels, run, opts.all_queries, opts.only_qid)
    found = None if opts.all_queries else stops.unanswered(qrels, run, opts.only_qid)
    grouped = opts.rel_format == "qrels_jg"
    for other in (None if grouped else stops.negative_first_topic(qrels, first),
                  stops.unservable(selected, grouped, first)):
        if other is not None:
            found = other.earlier(found)
    return found


def _topics_before(qid: str, qrels: Qrels, run: Run, selected: Sequence[SelectedMeasure],
                   opts: Options, zscores: ZScores | None) -> Evaluated | None:
    """The topics trec_eval evaluates (and prints with -q) before stopping at ``qid``."""
    names = [q for q in qrels.qids() if q.encode() < qid.encode()]
    kept_run = Run(run.frame.filter(pl.col("qid").cast(pl.String).is_in(names)), run.runid,
                   run.path)
    if not opts.all_queries:
        names = [q for q in names if q in set(kept_run.qid_layout().names)]
    if not names:
        return None
    kept_qrels = Qrels(qrels.frame.filter(pl.col("qid").is_in(names)), qrels.path)
    return _evaluate_pair(kept_qrels, kept_run, selected, opts, zscores)


def _evaluate_pair(qrels: Qrels, run: Run, selected: Sequence[SelectedMeasure], opts: Options,
                   zscores: ZScores | None) -> Evaluated:
    every_topic = qrels
    if opts.only_qid is not None:
        qrels, run = _only_topic(qrels, run, opts.only_qid)
    # Topics of the qrels absent from the run (evaluated only with -c) retrieve trec_eval's
    # stand-in document; the values it would distort are zeroed afterwards (clear_stand_ins).
    missing_names = (set(qrels.qids()) - set(run.qid_layout().names) if opts.all_queries
                     else set())
    run = with_stand_ins(run, missing_names)
    grouped = opts.rel_format == "qrels_jg"
    if grouped:
        qrels, run = groups.one_topic_per_group(qrels, run)
    ranking = Ranking.from_trec(qrels, run, max_retrieved=opts.max_retrieved,
                                all_qrels_queries=opts.all_queries)
    if opts.judged_only:
        ranking = judged_only(ranking)
    ctx = MeasureContext(rel_level=opts.rel_level, num_docs=opts.num_docs)
    results = topic_values(ranking, selected, ctx)
    qids = groups.average_over_groups(results, ranking.qids) if grouped else ranking.qids
    return _finish(qids, results, missing_names, every_topic, ranking.runid, opts, zscores)


def _finish(qids: tuple[str, ...], results: list[MeasureResult], missing_names: set[str],
            every_topic: Qrels, runid: str, opts: Options,
            zscores: ZScores | None) -> Evaluated:
    """Per-topic values cleaned up (-c stand-ins), as z-scores (-Z), and summarised."""
    missing = np.array([q in missing_names for q in qids], dtype=bool)
    if missing.any():
        clear_stand_ins(results, missing)
    if zscores is not None:
        to_zscores(results, qids, zscores)
    # With -c trec_eval averages over every topic of the qrels, even those -D leaves out.
    divisor = len(every_topic.qids()) if opts.all_queries else len(qids)
    summarize(results, len(qids), divisor, runid)
    if opts.all_queries:
        _count_every_relevant(results, every_topic)
    return qids, results


def _only_topic(qrels: Qrels, run: Run, qid: str) -> tuple[Qrels, Run]:
    """trec_eval's -D level.qid: evaluate that topic only."""
    return (Qrels(qrels.frame.filter(pl.col("qid") == qid), qrels.path),
            Run(run.frame.filter(pl.col("qid").cast(pl.String) == qid), run.runid, run.path))


def _count_every_relevant(results: list[MeasureResult], qrels: Qrels) -> None:
    """With -c, trec_eval's summary num_rel goes back to the qrels file: every judgment with a
    grade above 0 in every topic, whatever -l says (the per-topic values follow -l)."""
    total = float(qrels.frame.filter(pl.col("rel") > 0).height)
    for res in results:
        if res.selected.measure.name == "num_rel":
            res.summary = [total]


def evaluate_files(
    qrels_path: str | os.PathLike[str],
    run_path: str | os.PathLike[str],
    measures: list[str],
    *,
    rel_level: int = 1,
    max_retrieved: int | None = None,
    all_queries: bool = False,
) -> dict[str, dict[str, float]]:
    """Evaluate a TREC run as ``trec_eval -q`` would, returning the values at full precision.

    ``measures`` use trec_eval's ``-m`` syntax (``"map"``, ``"P.10"``, ``"ndcg_cut.10"``,
    ``"official"``, ...). The result maps each topic id to ``{printed_name: value}`` (e.g.
    ``{"P_10": 0.3}``) for the values trec_eval prints per topic, and ``"all"`` to the summary
    values. Non-numeric values (``runid``, ``relstring``) are left out. Topics of the qrels
    without results are skipped (as trec_eval 9 and pytrec_eval do; trec_eval 10.0 and
    ``rageval trec-eval`` stop there with exit status 4).
    Raises UsageError for an unknown measure, InputError for bad files.
    """
    opts = Options(
        query_flag=True,
        rel_level=rel_level,
        max_retrieved=max_retrieved,
        all_queries=all_queries,
        like_trec_eval_10=False,
    )
    qids, results = run_evaluation(os.fspath(qrels_path), os.fspath(run_path), measures, opts)
    out: dict[str, dict[str, float]] = {q: {} for q in qids}
    summary: dict[str, float] = {}
    for res in results:
        kind = res.selected.measure.kind
        names = res.selected.names
        if isinstance(res.per_query, np.ndarray) and kind != "gm":
            rows = res.per_query.tolist()
            for qid, row in zip(qids, rows, strict=True):
                out[qid].update(zip(names, row, strict=True))
        for name, value in zip(names, res.summary, strict=False):
            if isinstance(value, float):
                summary[name] = value
    out["all"] = summary
    return out
