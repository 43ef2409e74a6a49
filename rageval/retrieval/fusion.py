"""Reciprocal rank fusion (Cormack, Clarke & Büttcher 2009).

The fused score of document d for a query is ``RRF(d) = sum over runs r of 1 / (k + rank_r(d))``,
where ``rank_r(d)`` is d's 1-based rank in run r and runs that did not retrieve d add nothing.
``k`` (default 60, the paper's value) damps the weight of the very top ranks.

Ranks are taken the way trec_eval reads a run: by score descending, then document id descending;
the rank column of the file is ignored. The fused run is ordered the same way, so evaluating it
with ``rageval trec-eval`` sees exactly the ranking written here.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from rageval.core.errors import InputError, UsageError


def trec_order(run: pl.DataFrame) -> pl.DataFrame:
    """Rows sorted per query by score descending, then document id descending (trec_eval)."""
    return run.sort(["qid", "score", "docno"], descending=[False, True, True])


def _with_ranks(run: pl.DataFrame) -> pl.DataFrame:
    return trec_order(run).with_columns(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("qid").alias("rank")
    )


def reciprocal_rank_fusion(
    runs: Sequence[pl.DataFrame],
    *,
    k: int = 60,
    depth: int | None = None,
    runid: str = "rrf",
    names: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Fuse runs given as frames with columns ``qid``, ``docno``, ``score``.

    Returns a frame with ``qid, docno, rank, score, runid`` in trec_eval order, keeping the top
    ``depth`` documents per query when given. A run listing a document twice for one query is an
    error (trec_eval refuses such a run too); ``names`` (file paths) label the runs in errors.
    """
    if not runs:
        raise UsageError("reciprocal rank fusion needs at least one run")
    if k < 0:
        raise UsageError(f"the RRF constant k must be non-negative, got {k}")
    for i, run in enumerate(runs):
        _check_unique(run, names[i] if names else f"run {i + 1}")
    contributions = [
        _with_ranks(run.select(pl.col("qid").cast(pl.String), "docno", "score")).select(
            "qid", "docno", (1.0 / (k + pl.col("rank"))).alias("rrf"), pl.lit(i).alias("run")
        )
        for i, run in enumerate(runs)
    ]
    # Summing in a fixed (run) order keeps the floating-point result, and so ties, reproducible.
    fused = (
        pl.concat(contributions)
        .sort(["qid", "docno", "run"])
        .group_by(["qid", "docno"], maintain_order=True)
        .agg(pl.col("rrf").sum().alias("score"))
    )
    ranked = _with_ranks(fused)
    if depth is not None:
        ranked = ranked.filter(pl.col("rank") <= depth)
    return ranked.select("qid", "docno", "rank", "score", pl.lit(runid).alias("runid"))


def _check_unique(run: pl.DataFrame, name: str) -> None:
    dup = run.select("qid", "docno").filter(pl.struct("qid", "docno").is_duplicated())
    if dup.height:
        qid, docno = dup.row(0)
        raise InputError(f"document {docno!r} is retrieved more than once for query {qid!r}",
                         path=name)
