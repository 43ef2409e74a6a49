"""A qrels and a run evaluated on the selected measures, as trec_eval does.

Per-query values come from the measures' kernels; the summary over topics is trec_eval's: a
sum for counts, a geometric mean for ``gm_*``, otherwise the mean, accumulated in query order.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from rageval.core.errors import InputError, RagevalError, UsageError
from rageval.retrieval import kernels as K
from rageval.retrieval.ranking import Ranking, fast_allocation
from rageval.retrieval.ranking.trec_grades import DuplicateDocument
from rageval.retrieval.trec import Qrels, Run, read_qrels, read_run
from rageval.retrieval.trec_eval.catalogue import Kind, MeasureContext
from rageval.retrieval.trec_eval.selection import SelectedMeasure, select_measures


@dataclass
class MeasureResult:
    """The values of one selected measure: per query, and summarised over the queries."""

    selected: SelectedMeasure
    per_query: np.ndarray | list[str] | None  # [nq, ncols] values, relstrings, or None
    summary: list[float | str]


def _evaluate(
    ranking: Ranking, selected: Sequence[SelectedMeasure], ctx: MeasureContext
) -> list[MeasureResult]:
    nq = ranking.num_queries
    results = []
    for sel in selected:
        m = sel.measure
        if m.kind == "runid":
            results.append(MeasureResult(sel, None, [ranking.runid]))
            continue
        if m.kind == "num_q":
            results.append(MeasureResult(sel, None, [float(nq)]))
            continue
        if m.kind == "relstring":
            length = int(sel.params[0]) if sel.params else 10
            results.append(MeasureResult(sel, K.relstring(ranking, length), []))
            continue
        assert m.compute is not None
        values = np.asarray(m.compute(ranking, ctx, sel.params), dtype=np.float64)
        if values.ndim == 1:
            values = values[:, None]
        results.append(MeasureResult(sel, values, _summarize(m.kind, values, nq)))
    return results


def _seq_total(column: np.ndarray) -> float:
    """Sum in query order, one addition at a time (trec_eval's accumulation)."""
    total = 0.0
    for v in column.tolist():
        total += v
    return total


def _summarize(kind: Kind, values: np.ndarray, nq: int) -> list[float | str]:
    out: list[float | str] = []
    for col in values.T:
        if kind == "long":
            out.append(_seq_total(col))
        elif kind == "gm":
            logs = np.array([math.log(max(v, K.MIN_GEO_MEAN)) for v in col.tolist()])
            out.append(math.exp(_seq_total(logs) / nq) if nq else 0.0)
        else:
            out.append(_seq_total(col) / nq if nq else 0.0)
    return out


def _judged_only(r: Ranking) -> Ranking:
    """trec_eval -J: drop retrieved documents that are not judged with a grade >= 0."""
    keep = r.te_rel() >= 0
    counts = np.bincount(r.segment_ids()[keep], minlength=r.num_queries)
    offsets = np.zeros(r.num_queries + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Ranking(
        qids=r.qids,
        offsets=offsets,
        grades=r.grades[keep],
        scores=None if r.scores is None else r.scores[keep],
        judged_offsets=r.judged_offsets,
        judged_grades=r.judged_grades,
        runid=r.runid,
    )


def _only_query(r: Ranking, qid: str) -> Ranking:
    """Restrict to one query (trec_eval's -D level.qid)."""
    if qid not in r.qids:
        raise UsageError(f"query '{qid}' is not evaluated")
    i = r.qids.index(qid)
    lo, hi = int(r.offsets[i]), int(r.offsets[i + 1])
    jlo, jhi = int(r.judged_offsets[i]), int(r.judged_offsets[i + 1])
    return Ranking(
        qids=(qid,),
        offsets=np.array([0, hi - lo], dtype=np.int64),
        grades=r.grades[lo:hi],
        scores=None if r.scores is None else r.scores[lo:hi],
        judged_offsets=np.array([0, jhi - jlo], dtype=np.int64),
        judged_grades=r.judged_grades[jlo:jhi],
        runid=r.runid,
        _pooled=None if r._pooled is None else r._pooled[lo:hi],
    )


class TopicStop(RagevalError):
    """trec_eval 10.0 stops at topic ``qid`` with exit status 4: a qrels topic without results
    (without ``-c``) or a document retrieved twice for it. It has printed, with ``-q``, the
    values of the topics before it (``partial``: their ranking and results, or None)."""

    exit_code = 4

    def __init__(self, message: str, qid: str) -> None:
        super().__init__(message)
        self.qid = qid
        self.partial: tuple[Ranking, list[MeasureResult]] | None = None


def _unanswered(qrels: Qrels, run: Run, only_qid: str | None) -> TopicStop | None:
    """The first qrels topic (strcmp order) the run has no line for, as trec_eval's stop."""
    answered = set(run.qid_layout().names)
    missing = [q for q in qrels.qids() if q not in answered and only_qid in (None, q)]
    if not missing:
        return None
    first = min(missing, key=str.encode)
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    return TopicStop(
        f"qrels topic '{first}'{more} has no results in the run: trec_eval 10.0 stops there "
        "with exit status 4 (its message reads \"result qid '" + first + "' not found in "
        "qrels\"); -c scores such topics as retrieving nothing", first)


def _negative_first_topic(qrels: Qrels, run: Run, opts: Options) -> TopicStop | None:
    """trec_eval 10.0 sizes a per-grade table by the topic's highest grade plus one, and its
    allocator hands back no table for a size of 0 until some topic has needed one: so when the
    first topic it evaluates judges every document below 0, it stops there (exit 4)."""
    answered = set(run.qid_layout().names)
    evaluated = [q for q in qrels.qids() if (opts.all_queries or q in answered)
                 and opts.only_qid in (None, q)]
    if not evaluated:
        return None
    first = min(evaluated, key=str.encode)
    top = qrels.frame.filter(pl.col("qid") == first).get_column("rel").max()
    if top is None or int(top) >= 0:  # type: ignore[arg-type]
        return None
    return TopicStop(
        f"qrels topic '{first}', the first evaluated, judges every document below 0: trec_eval "
        "10.0 cannot calculate its measures there and stops with exit status 4", first)


def _topics_before(qid: str, qrels: Qrels, run: Run, selected: Sequence[SelectedMeasure],
                   opts: Options) -> tuple[Ranking, list[MeasureResult]] | None:
    """The topics trec_eval evaluates (and prints with -q) before stopping at ``qid``."""
    names = [q for q in qrels.qids() if q.encode() < qid.encode()]
    kept_run = Run(run.frame.filter(pl.col("qid").cast(pl.String).is_in(names)), run.runid,
                   run.path)
    if not opts.all_queries:
        names = [q for q in names if q in set(kept_run.qid_layout().names)]
    if not names:
        return None
    kept_qrels = Qrels(qrels.frame.filter(pl.col("qid").is_in(names)), qrels.path)
    return _evaluate_pair(kept_qrels, kept_run, selected, opts)


@dataclass(frozen=True)
class Options:
    """trec_eval's command-line options (see :data:`~.command.HELP`)."""

    query_flag: bool = False
    summary_flag: bool = True
    all_queries: bool = False
    judged_only: bool = False
    rel_level: int = 1
    max_retrieved: int | None = None
    num_docs: int = 0
    only_qid: str | None = None
    # Read what trec_eval 10.0 reads (numbers as C's atof/atol, its qrels comment and blank-line
    # rules) and stop where it stops (exit 4: a qrels topic without results, a document listed
    # twice, a first topic judged all below 0). False reads strictly and skips topics without
    # results, as trec_eval 9 and pytrec_eval do.
    like_trec_eval_10: bool = True


def run_evaluation(
    qrels_path: str, run_path: str, specs: Sequence[str], opts: Options
) -> tuple[Ranking, list[MeasureResult]]:
    """Read both files and evaluate the measures of ``specs`` (``-m`` syntax) under ``opts``."""
    with fast_allocation():
        return _run_inner(qrels_path, run_path, specs, opts)


def _run_inner(
    qrels_path: str, run_path: str, specs: Sequence[str], opts: Options
) -> tuple[Ranking, list[MeasureResult]]:
    selected = select_measures(specs)
    qrels = read_qrels(qrels_path, like_trec_eval=opts.like_trec_eval_10)
    run = read_run(run_path, like_trec_eval=opts.like_trec_eval_10)
    if not opts.like_trec_eval_10:
        return _evaluate_pair(qrels, run, selected, opts)
    stop = None if opts.all_queries else _unanswered(qrels, run, opts.only_qid)
    negative = _negative_first_topic(qrels, run, opts)
    if negative is not None and (stop is None or negative.qid.encode() < stop.qid.encode()):
        stop = negative
    try:
        if stop is None:
            return _evaluate_pair(qrels, run, selected, opts)
        Ranking.from_trec(qrels, run, max_retrieved=opts.max_retrieved,
                          all_qrels_queries=opts.all_queries)  # a duplicate may come first
    except DuplicateDocument as dup:
        # trec_eval meets the duplicate when it evaluates that topic, unless it stopped earlier.
        if stop is None or dup.qid.encode() < stop.qid.encode():
            stop = TopicStop(f"{dup}: trec_eval 10.0 stops there with exit status 4", dup.qid)
    except InputError:
        if stop is None:  # no topic in common: trec_eval stops at the first one it lacks
            raise
    assert stop is not None
    if opts.query_flag and opts.only_qid is None:
        stop.partial = _topics_before(stop.qid, qrels, run, selected, opts)
    raise stop


def _evaluate_pair(qrels: Qrels, run: Run, selected: Sequence[SelectedMeasure],
                   opts: Options) -> tuple[Ranking, list[MeasureResult]]:
    # Topics of the qrels absent from the run (evaluated only with -c) retrieve trec_eval's
    # stand-in document; the values it would distort are zeroed afterwards (_clear_stand_ins).
    missing_names = (set(qrels.qids()) - set(run.qid_layout().names) if opts.all_queries
                     else set())
    ranking = Ranking.from_trec(
        qrels, _with_stand_ins(run, missing_names), max_retrieved=opts.max_retrieved,
        all_qrels_queries=opts.all_queries
    )
    if opts.judged_only:
        ranking = _judged_only(ranking)
    if opts.only_qid is not None:
        ranking = _only_query(ranking, opts.only_qid)
    missing = np.array([q in missing_names for q in ranking.qids], dtype=bool)
    ctx = MeasureContext(rel_level=opts.rel_level, num_docs=opts.num_docs)
    results = _evaluate(ranking, selected, ctx)
    if missing.any():
        _clear_stand_ins(results, missing)
    if opts.all_queries:
        _count_every_relevant(results, qrels)
    return ranking, results


# trec_eval -c evaluates a topic without results on this one unjudged document, scored 1.0.
STAND_IN_DOCNO = "ceci_nest_pas_un_docno"


def _with_stand_ins(run: Run, qids: set[str]) -> Run:
    if not qids:
        return run
    names = sorted(qids)
    rows = pl.DataFrame({"qid": names, "docno": [STAND_IN_DOCNO] * len(names),
                         "score": [1.0] * len(names)}, schema=run.frame.schema)
    return Run(pl.concat([run.frame, rows]), run.runid, run.path)


def _clear_stand_ins(results: list[MeasureResult], missing: np.ndarray) -> None:
    """trec_eval's clean-up after scoring a stand-in: num_ret, utility, unj*, rbp_resid and
    relstring of such a topic are zeroed (emptied), before the summary."""
    for res in results:
        if isinstance(res.per_query, list):
            res.per_query = ["" if gone else text
                             for text, gone in zip(res.per_query, missing.tolist(), strict=True)]
            continue
        if res.per_query is None:
            continue
        cleared = [i for i, name in enumerate(res.selected.names)
                   if name in ("num_ret", "utility", "rbp_resid") or name.startswith("unj")]
        if cleared:
            res.per_query[np.ix_(missing, cleared)] = 0.0
            res.summary = _summarize(res.selected.measure.kind, res.per_query, len(missing))


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
    ranking, results = run_evaluation(os.fspath(qrels_path), os.fspath(run_path), measures, opts)
    out: dict[str, dict[str, float]] = {q: {} for q in ranking.qids}
    summary: dict[str, float] = {}
    for res in results:
        kind = res.selected.measure.kind
        names = res.selected.names
        if isinstance(res.per_query, np.ndarray) and kind != "gm":
            rows = res.per_query.tolist()
            for qid, row in zip(ranking.qids, rows, strict=True):
                out[qid].update(zip(names, row, strict=True))
        for name, value in zip(names, res.summary, strict=False):
            if isinstance(value, float):
                summary[name] = value
    out["all"] = summary
    return out
