"""trec_eval's judgment groups (``-R qrels_jg``): judgments by group, measures averaged over them.

A ``qrels_jg`` file judges each topic once per group (say, per assessor). The ``*_avgjg``
measures score the topic's ranking against each group's judgments and average over its groups
(a sum in group order, divided by their number when there is more than one). Each (topic,
group) becomes a topic of its own here, named ``topic NUL group`` so that the strcmp order of
the names is the topic order, then the group order; the run's lines of the topic are repeated
for each of its groups.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from rageval.retrieval.trec import Qrels, Run
from rageval.retrieval.trec_eval.per_topic import MeasureResult

_SEPARATOR = "\x00"


def topic_of(name: str) -> str:
    """The topic of a (topic, group) name."""
    return name.split(_SEPARATOR, 1)[0]


def one_topic_per_group(qrels: Qrels, run: Run) -> tuple[Qrels, Run]:
    """The judgments and the run with a topic per (topic, judgment group)."""
    judged = qrels.frame
    name = pl.concat_str(["qid", pl.lit(_SEPARATOR), "jg"]).alias("qid")
    groups = judged.select("qid", "jg").unique()
    lines = (run.frame.with_columns(pl.col("qid").cast(pl.String))
             .join(groups, on="qid", how="inner")
             .select(name.cast(pl.Categorical()), "docno", "score"))
    return (Qrels(judged.select(name, "docno", "rel"), qrels.path),
            Run(lines, run.runid, run.path))


def average_over_groups(results: list[MeasureResult], names: tuple[str, ...]) -> tuple[str, ...]:
    """Fold each topic's groups into one row, as trec_eval accumulates them; return the topics."""
    topics: list[str] = []
    bounds: list[int] = []
    for i, name in enumerate(names):
        topic = topic_of(name)
        if not topics or topics[-1] != topic:
            topics.append(topic)
            bounds.append(i)
    bounds.append(len(names))
    for res in results:
        if not isinstance(res.per_query, np.ndarray):
            continue
        folded = np.zeros((len(topics), res.per_query.shape[1]), dtype=np.float64)
        for t in range(len(topics)):
            lo, hi = bounds[t], bounds[t + 1]
            total = np.zeros(res.per_query.shape[1], dtype=np.float64)
            for row in res.per_query[lo:hi]:
                total = total + row
            folded[t] = total / (hi - lo) if hi - lo > 1 else total
        res.per_query = folded
    return tuple(topics)
