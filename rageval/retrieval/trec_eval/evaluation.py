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

from rageval.core.errors import UsageError
from rageval.retrieval import kernels as K
from rageval.retrieval.ranking import Ranking, fast_allocation
from rageval.retrieval.trec import read_qrels, read_run
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
    qrels = read_qrels(qrels_path)
    run = read_run(run_path)
    ranking = Ranking.from_trec(
        qrels, run, max_retrieved=opts.max_retrieved, all_qrels_queries=opts.all_queries
    )
    # Topics of the qrels absent from the run (evaluated only with -c): trec_eval scores them
    # on a stand-in ranking and then zeroes the values that stand-in would distort.
    missing_names = set(ranking.qids) - set(run.qid_layout().names) if opts.all_queries else set()
    del run
    if opts.judged_only:
        ranking = _judged_only(ranking)
    if opts.only_qid is not None:
        ranking = _only_query(ranking, opts.only_qid)
    missing = np.array([q in missing_names for q in ranking.qids], dtype=bool)
    ctx = MeasureContext(rel_level=opts.rel_level, num_docs=opts.num_docs, missing=missing)
    return ranking, _evaluate(ranking, selected, ctx)


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
    values. Non-numeric values (``runid``, ``relstring``) are left out.
    Raises UsageError for an unknown measure, InputError for bad files.
    """
    opts = Options(
        query_flag=True,
        rel_level=rel_level,
        max_retrieved=max_retrieved,
        all_queries=all_queries,
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
