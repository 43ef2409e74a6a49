"""Per-topic values of a run evaluated slice by slice, in bounded memory.

trec_eval's value of a topic depends on that topic's results and judgments only, so a run read
in slices of whole topics (:class:`~rageval.retrieval.trec.chunked_read.RunSlices`) is scored one
slice at a time, on the judgments of that slice's topics, and the per-topic values are merged in
trec_eval's topic order (``strcmp`` order). The summary is then computed from them as for a whole
run. Anything the slices cannot settle (a duplicate document, a NaN score, a file the fast path
refuses) raises: the caller then evaluates the whole file, which decides it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from rageval.retrieval.ranking import Ranking
from rageval.retrieval.ranking.arrays import offsets_from_counts
from rageval.retrieval.trec import Qrels, Run
from rageval.retrieval.trec.chunked_read import NotStreamable, RunSlices
from rageval.retrieval.trec_eval.catalogue import MeasureContext
from rageval.retrieval.trec_eval.per_topic import (
    MeasureResult,
    judged_only,
    topic_values,
    with_stand_ins,
)
from rageval.retrieval.trec_eval.selection import SelectedMeasure

# One slice's topics (in strcmp order) and their values.
Part = tuple[tuple[str, ...], list[MeasureResult]]

__all__ = ["streamed_values"]


def streamed_values(
    qrels: Qrels,
    slices: RunSlices,
    selected: Sequence[SelectedMeasure],
    ctx: MeasureContext,
    *,
    max_retrieved: int | None,
    all_queries: bool,
    judged: bool,
) -> tuple[tuple[str, ...], list[MeasureResult]]:
    """Each measure's per-topic values over every evaluated topic (strcmp order), the run read
    from ``slices``; ``summary`` is left empty. With ``all_queries`` (``-c``) the qrels topics
    the run lacks are scored on trec_eval's stand-in document, as for a whole run.

    Raises NotStreamable (or the InputError of a slice) when the whole file must decide."""
    judged_topics = set(qrels.qids())
    by_topic = _JudgmentsByTopic(qrels)
    parts: list[Part] = []

    def score(run: Run, names: list[str]) -> None:
        ranking = Ranking.from_trec(by_topic.of(names), run, max_retrieved=max_retrieved)
        if judged:
            ranking = judged_only(ranking)
        parts.append((ranking.qids, topic_values(ranking, selected, ctx)))
        del ranking  # this slice's arrays go before the next slice is read

    for run in slices:
        names = [n for n in run.qid_layout().names if n in judged_topics]
        if names:  # a slice of topics the qrels do not judge is ignored, as trec_eval does
            score(run, names)
    if all_queries:
        missing = sorted(judged_topics - slices.names)
        if missing:
            empty = pl.DataFrame(schema={"qid": pl.Categorical(), "docno": pl.String,
                                         "score": pl.Float64})
            score(with_stand_ins(Run(empty, slices.runid, slices.path), set(missing)), missing)
    if not parts:
        raise NotStreamable("no topic evaluated")  # the whole-file path reports it
    return _merged(parts, selected)


class _JudgmentsByTopic:
    """The judgments sorted by topic once, so that each slice takes its topics' judgments as
    row ranges (a filter over every judgment per slice costs more than the slice's ranking)."""

    def __init__(self, qrels: Qrels) -> None:
        codes = qrels.qid_codes()
        order = np.argsort(codes, kind="stable")  # file order within a topic
        self.frame = qrels.frame[order]
        self.path = qrels.path
        self.names = qrels.qids()
        self.index = {name: i for i, name in enumerate(self.names)}
        self.offsets = offsets_from_counts(np.bincount(codes, minlength=len(self.names)))

    def of(self, names: Sequence[str]) -> Qrels:
        """The judgments of these topics (each judged), topics in strcmp order."""
        topics = np.array(sorted(self.index[name] for name in names), dtype=np.int64)
        starts = self.offsets[topics]
        counts = self.offsets[topics + 1] - starts
        first = np.cumsum(counts) - counts  # of each topic in the subset
        rows = np.arange(int(counts.sum())) - np.repeat(first - starts, counts)
        codes = np.repeat(np.arange(topics.size, dtype=np.int64), counts)
        qids = [self.names[i] for i in topics.tolist()]
        return Qrels(self.frame[rows], self.path, _cache={"qids": qids, "codes": codes})


def _merged(parts: list[Part], selected: Sequence[SelectedMeasure]) -> tuple[
        tuple[str, ...], list[MeasureResult]]:
    """The parts' values as one result per measure, topics in strcmp order."""
    qids = [q for names, _ in parts for q in names]
    order = sorted(range(len(qids)), key=lambda i: qids[i].encode())
    results = []
    for k, sel in enumerate(selected):
        pieces = [res[k].per_query for _, res in parts]
        per_query: np.ndarray | list[str] | None
        if isinstance(pieces[0], np.ndarray):
            per_query = np.concatenate(pieces)[order]  # type: ignore[arg-type]
        elif isinstance(pieces[0], list):
            flat = [v for piece in pieces for v in piece]  # type: ignore[union-attr]
            per_query = [flat[i] for i in order]
        else:
            per_query = None
        results.append(MeasureResult(sel, per_query, []))
    return tuple(qids[i] for i in order), results
