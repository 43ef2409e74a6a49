"""The values of each topic, as trec_eval computes them, and their summary over topics.

Per-topic values come from the measures' kernels on a ranking (after ``-J``), are cleaned up
for the topics ``-c`` scores on its stand-in document, and are summarised as trec_eval does: a
sum for counts, a geometric mean for ``gm_*``, otherwise the mean, accumulated in topic order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from rageval.retrieval import kernels as K
from rageval.retrieval.ranking import Ranking
from rageval.retrieval.trec import Run
from rageval.retrieval.trec_eval.catalogue import Kind, MeasureContext
from rageval.retrieval.trec_eval.selection import SelectedMeasure

# trec_eval -c evaluates a topic without results on this one unjudged document, scored 1.0.
STAND_IN_DOCNO = "ceci_nest_pas_un_docno"


@dataclass
class MeasureResult:
    """The values of one selected measure: per topic, and summarised over the topics."""

    selected: SelectedMeasure
    per_query: np.ndarray | list[str] | None  # [nq, ncols] values, relstrings, or None
    summary: list[float | str]


def topic_values(ranking: Ranking, selected: Sequence[SelectedMeasure],
                 ctx: MeasureContext) -> list[MeasureResult]:
    """Each measure's values per topic (``summary`` left empty for :func:`summarize`)."""
    results = []
    for sel in selected:
        m = sel.measure
        if m.kind in ("runid", "num_q"):
            results.append(MeasureResult(sel, None, []))
        elif m.kind == "relstring":
            length = int(sel.params[0]) if sel.params else 10
            results.append(MeasureResult(sel, K.relstring(ranking, length), []))
        else:
            assert m.compute is not None
            values = np.asarray(m.compute(ranking, ctx, sel.params), dtype=np.float64)
            if values.ndim == 1:
                values = values[:, None]
            if m.kind == "gm":  # trec_eval keeps log(max(value, floor)) per topic (-Z sees it)
                floored = [math.log(max(v, K.MIN_GEO_MEAN)) for v in values[:, 0].tolist()]
                values = np.array(floored, dtype=np.float64)[:, None]
            results.append(MeasureResult(sel, values, []))
    return results


def summarize(results: list[MeasureResult], nq: int, divisor: int, runid: str) -> None:
    """Fill each result's summary over the ``nq`` topics evaluated: sums for counts, means over
    ``divisor`` topics otherwise (with -c, every topic of the qrels; a geometric mean counts
    the topics not evaluated at its floor, as trec_eval)."""
    for res in results:
        kind = res.selected.measure.kind
        if kind == "runid":
            res.summary = [runid]
        elif kind == "num_q":
            res.summary = [float(divisor)]
        elif isinstance(res.per_query, np.ndarray):
            res.summary = _summary_of(kind, res.per_query, nq, divisor)


def _seq_total(column: np.ndarray) -> float:
    """Sum in topic order, one addition at a time (trec_eval's accumulation)."""
    total = 0.0
    for v in column.tolist():
        total += v
    return total


def _summary_of(kind: Kind, values: np.ndarray, nq: int, divisor: int) -> list[float | str]:
    out: list[float | str] = []
    for col in values.T:
        if kind == "long":
            out.append(_seq_total(col))
        elif kind == "gm":  # the column holds logs (see topic_values)
            total = _seq_total(col) + (divisor - nq) * math.log(K.MIN_GEO_MEAN)
            out.append(math.exp(total / divisor) if divisor else 0.0)
        else:
            out.append(_seq_total(col) / divisor if divisor else 0.0)
    return out


def judged_only(r: Ranking) -> Ranking:
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


def with_stand_ins(run: Run, qids: set[str]) -> Run:
    """The run, with trec_eval's stand-in document for each of ``qids`` (topics -c adds)."""
    if not qids:
        return run
    names = sorted(qids)
    rows = pl.DataFrame({"qid": names, "docno": [STAND_IN_DOCNO] * len(names),
                         "score": [1.0] * len(names)}, schema=run.frame.schema)
    return Run(pl.concat([run.frame, rows]), run.runid, run.path)


def clear_stand_ins(results: list[MeasureResult], missing: np.ndarray) -> None:
    """trec_eval's clean-up after scoring a stand-in: num_ret, utility, unj*, rbp_resid and
    relstring of such a topic are zeroed (emptied)."""
    for res in results:
        if isinstance(res.per_query, list):
            res.per_query = ["" if gone else text
                             for text, gone in zip(res.per_query, missing.tolist(), strict=True)]
        elif res.per_query is not None:
            cleared = [i for i, name in enumerate(res.selected.names)
                       if name in ("num_ret", "utility", "rbp_resid") or name.startswith("unj")]
            if cleared:
                res.per_query[np.ix_(missing, cleared)] = 0.0
