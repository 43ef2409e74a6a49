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
from rageval.retrieval.ranking.trec_grades import UNIQUE_JUDGMENTS, all_distinct, salted_keys
from rageval.retrieval.trec import Qrels, Run
from rageval.retrieval.trec.chunked_read import NotStreamable, RunSlices
from rageval.retrieval.trec.frames import DOCNO_HASHES
from rageval.retrieval.trec_eval.catalogue import MeasureContext
from rageval.retrieval.trec_eval.per_topic import (
    MeasureResult,
    judged_only,
    topic_values,
    with_stand_ins,
)
from rageval.retrieval.trec_eval.selection import SelectedMeasure
from rageval.retrieval.trec_eval.slice_ranking import SliceJudgments, ranked_slice

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

    def score(run: Run, names: list[str], whole: bool = False) -> None:
        ranking = (ranked_slice(run, by_topic.in_order(run), max_retrieved)
                   if whole and by_topic.unique else None)
        if ranking is None:  # (the topics in trec_eval's order, and its every rule)
            ranking = Ranking.from_trec(by_topic.of(names), run, max_retrieved=max_retrieved)
        if judged:
            ranking = judged_only(ranking)
        parts.append((ranking.qids, topic_values(ranking, selected, ctx)))
        del ranking  # this slice's arrays go before the next slice is read

    for run in slices:
        every = run.qid_layout().names
        names = [n for n in every if n in judged_topics]
        if names:  # a slice of topics the qrels do not judge is ignored, as trec_eval does
            score(run, names, whole=len(names) == len(every))
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
    row ranges (a filter over every judgment per slice costs more than the slice's ranking).

    Topics keep the order in which the qrels first list them: a run usually lists its topics
    in that order too, and a slice's judgments are then one range of rows, taken without a
    copy. Whether any topic judges a document twice is settled here once for all slices."""

    def __init__(self, qrels: Qrels) -> None:
        codes = qrels.qid_codes()  # strcmp rank of each judgment's topic
        self.names = qrels.qids()
        block_starts = np.flatnonzero(np.diff(codes, prepend=-1))  # blocks of one topic
        _, first_block = np.unique(codes[block_starts], return_index=True)
        by_appearance = np.argsort(block_starts[first_block])  # topics in the file's order
        position = np.empty_like(by_appearance)
        position[by_appearance] = np.arange(by_appearance.size)
        rows = np.argsort(position[codes], kind="stable")  # file order within a topic
        in_file_order = bool(np.all(rows[1:] > rows[:-1]))
        self.frame = qrels.frame if in_file_order else qrels.frame[rows]
        self.hashes = qrels.docno_hashes()[rows]
        self.rel = self.frame.get_column("rel").to_numpy()
        counts = np.bincount(codes, minlength=len(self.names))[by_appearance]
        self.offsets = offsets_from_counts(counts)
        self.position = dict(zip(self.names, position.tolist(), strict=True))
        self.path = qrels.path
        keys = salted_keys(qrels.docno_hashes(), codes, len(self.names))
        self.unique = all_distinct(keys)  # else each slice checks its own

    def of(self, names: Sequence[str]) -> Qrels:
        """The judgments of these topics (each judged), topics in strcmp order."""
        qids = sorted(names)
        code = {name: i for i, name in enumerate(qids)}
        by_position = sorted(names, key=self.position.__getitem__)
        topics = np.array([self.position[name] for name in by_position], dtype=np.int64)
        starts = self.offsets[topics]
        counts = self.offsets[topics + 1] - starts
        codes = np.repeat(np.array([code[name] for name in by_position], dtype=np.int64), counts)
        cache = {"qids": qids, "codes": codes, UNIQUE_JUDGMENTS: self.unique}
        if topics[-1] - topics[0] + 1 == topics.size:  # one range of rows
            first, end = int(starts[0]), int(starts[0] + counts.sum())
            cache[DOCNO_HASHES] = self.hashes[first:end]
            return Qrels(self.frame.slice(first, end - first), self.path, _cache=cache)
        first_out = np.cumsum(counts) - counts
        rows = np.arange(int(counts.sum())) - np.repeat(first_out - starts, counts)
        cache[DOCNO_HASHES] = self.hashes[rows]
        return Qrels(self.frame[rows], self.path, _cache=cache)


    def in_order(self, run: Run) -> SliceJudgments:
        """The judgments of a run's topics (each judged, each in one block of lines), topic
        after topic in the order of the run's blocks."""
        layout = run.qid_layout()
        if layout.block_name is None or len(layout.names) != layout.block_name.size:
            return SliceJudgments(self.hashes[:0], self.rel[:0], self.frame.get_column(
                "docno").clear(), np.zeros(0, dtype=np.int64))  # ranked_slice refuses it
        position = self.position
        topics = np.array([position[layout.names[i]] for i in layout.block_name.tolist()],
                          dtype=np.int64)
        starts = self.offsets[topics]
        counts = self.offsets[topics + 1] - starts
        docno = self.frame.get_column("docno")
        if np.array_equal(topics, topics[0] + np.arange(topics.size)):  # one range of rows
            first, end = int(starts[0]), int(self.offsets[topics[-1] + 1])
            return SliceJudgments(self.hashes[first:end], self.rel[first:end],
                                  docno.slice(first, end - first), counts)
        rows = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - starts,
                                                        counts)
        return SliceJudgments(self.hashes[rows], self.rel[rows], docno[rows], counts)


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
