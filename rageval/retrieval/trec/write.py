"""Writing TREC run files, in trec_eval's ranking order."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

import polars as pl

from rageval.core.errors import InputError
from rageval.retrieval.trec.frames import PathLike, Run
from rageval.retrieval.trec.syntax import WHITESPACE


def write_run(
    dest: PathLike | TextIO,
    run: Run | pl.DataFrame | Mapping[str, Mapping[str, float] | Sequence[tuple[str, float]]],
    *,
    runid: str | None = None,
    max_per_query: int | None = None,
) -> int:
    """Write a run in TREC format: ``qid Q0 docno rank score runid``, one line per result.

    ``run`` is a :class:`Run`, a polars DataFrame with ``qid``, ``docno`` and ``score``
    columns, or a mapping ``{qid: {docno: score}}`` (or ``{qid: [(docno, score), ...]}``).
    Results are written in trec_eval's ranking order -- queries in ``strcmp`` order, then score
    descending, ties broken by docno descending -- with ranks 1..n, so reading the file back
    (with any TREC tool) gives the same ranking. ``max_per_query`` keeps only the top results
    of each query. Scores are written with the shortest repr that round-trips a float64.
    ``runid`` defaults to the run's own name (or ``"rageval"``); it may not contain whitespace.
    Returns the number of lines written.
    """
    frame, default_id = _run_frame(run)
    name = runid if runid is not None else (default_id or "rageval")
    if not name or any(ch in name for ch in WHITESPACE):
        raise InputError(f"runid must be a non-empty string without whitespace, got {name!r}")
    bad = frame.filter(
        pl.col("qid").str.contains_any(list(WHITESPACE))
        | pl.col("docno").str.contains_any(list(WHITESPACE))
        | (pl.col("qid").str.len_bytes() == 0) | (pl.col("docno").str.len_bytes() == 0)
    )
    if bad.height:
        row = bad.row(0, named=True)
        raise InputError(
            f"query and document ids must be non-empty and contain no whitespace, got "
            f"qid={row['qid']!r} docno={row['docno']!r}"
        )
    if frame.select(pl.col("score").is_nan().any()).item():
        raise InputError("scores must be numbers, found NaN")
    ordered = frame.sort(["qid", "score", "docno"], descending=[False, True, True])
    ordered = ordered.with_columns(rank=pl.int_range(1, pl.len() + 1).over("qid"))
    if max_per_query is not None:
        ordered = ordered.filter(pl.col("rank") <= max_per_query)
    lines = ordered.select(
        pl.concat_str(
            [
                pl.col("qid"),
                pl.lit("Q0"),
                pl.col("docno"),
                pl.col("rank").cast(pl.String),
                pl.col("score").cast(pl.String),
                pl.lit(name),
            ],
            separator=" ",
        ).alias("line")
    ).get_column("line")
    text = "\n".join(lines.to_list())
    if text:
        text += "\n"
    if isinstance(dest, str | os.PathLike):
        Path(dest).write_text(text, encoding="utf-8")
    else:
        dest.write(text)
    return lines.len()


def _run_frame(
    run: Run | pl.DataFrame | Mapping[str, Mapping[str, float] | Sequence[tuple[str, float]]],
) -> tuple[pl.DataFrame, str]:
    if isinstance(run, Run):
        frame, default_id = run.frame, run.runid
    elif isinstance(run, pl.DataFrame):
        missing = {"qid", "docno", "score"} - set(run.columns)
        if missing:
            raise InputError(f"run frame lacks column(s): {', '.join(sorted(missing))}")
        frame, default_id = run, ""
    else:
        qids: list[str] = []
        docnos: list[str] = []
        scores: list[float] = []
        for qid, results in run.items():
            pairs = results.items() if isinstance(results, Mapping) else results
            for docno, score in pairs:
                qids.append(str(qid))
                docnos.append(str(docno))
                scores.append(float(score))
        frame = pl.DataFrame({"qid": qids, "docno": docnos, "score": scores})
        default_id = ""
    frame = frame.select(
        pl.col("qid").cast(pl.String),
        pl.col("docno").cast(pl.String),
        pl.col("score").cast(pl.Float64),
    )
    dup = frame.select(pl.struct("qid", "docno").is_duplicated().any()).item()
    if dup:
        raise InputError("a document appears twice for the same query")
    return frame, default_id
