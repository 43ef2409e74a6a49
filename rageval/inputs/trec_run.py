"""Records from a TREC run: one per query, its retrieved documents as contexts in rank order.

The run is read by rageval's TREC reader and ranked as trec_eval ranks it (score descending,
ties broken by docno descending; the rank column is ignored). Records come in the order their
query first appears in the run file. ``depth`` keeps each query's top results. Query texts,
document texts are joined in by id (a query or document of the run missing from the file that
should hold it is an error naming the run line); a BEIR directory's judgments come beside the
records, for the run's judgments join (:class:`~rageval.core.records.judgments.JudgmentsJoin`).
"""

from __future__ import annotations

import os
from typing import Any

from rageval.core.errors import InputError
from rageval.core.records.model import Context, Record
from rageval.inputs.spec import InputSpec, LoadedInputs
from rageval.inputs.texts import read_beir_qrels, read_corpus, read_queries
from rageval.retrieval.trec import locate_line, read_run

__all__ = ["load_run"]


def _ranked(frame: Any, depth: int | None) -> Any:
    """The run's lines as (qid, docno, score), queries in order of first appearance, each
    query's results in rank order, cut at ``depth``."""
    import polars as pl

    ranked = (frame.select(pl.col("qid").cast(pl.String), "docno", "score")
              .with_row_index("row")
              .with_columns(first=pl.col("row").min().over("qid"))
              .sort(["first", "score", "docno"], descending=[False, True, True],
                    maintain_order=True))
    if depth is not None:
        ranked = ranked.filter(pl.int_range(pl.len()).over("qid") < depth)
    return ranked.select("qid", "docno", "score")


def _check_lines(ranked: Any, path: str) -> None:
    """A document retrieved twice for a query, or a score that is not finite, is an error."""
    import polars as pl

    twice = ranked.filter(pl.struct("qid", "docno").is_duplicated())
    if twice.height:
        qid, docno, _ = twice.row(0)
        raise InputError(f"document {docno!r} is retrieved twice for query {qid!r}", path=path,
                         line=locate_line(path, qid, docno, 2))
    bad = ranked.filter(~pl.col("score").is_finite())
    if bad.height:
        qid, docno, score = bad.row(0)
        raise InputError(f"score {score} is not a finite number", path=path,
                         line=locate_line(path, qid, docno, 1), field="score")


def _texts_of(spec: InputSpec) -> tuple[str | None, str | None, str | None]:
    """The queries, corpus and qrels files to read (those of the BEIR directory, if any)."""
    paths = spec.beir_paths()
    if paths is None or spec.beir is None:
        return spec.queries, spec.corpus, None
    beir = os.fspath(spec.beir)
    if not os.path.isdir(beir):
        raise InputError("BEIR directory not found" if not os.path.exists(beir)
                         else "expected a BEIR directory (queries.jsonl, corpus.jsonl, qrels/)",
                         path=beir)
    return paths


def _missing(kind: str, name: str, holder: str, path: str, qid: str, docno: str) -> InputError:
    return InputError(f"{kind} {name!r} is not in {holder}", path=path,
                      line=locate_line(path, qid, docno, 1))


def load_run(spec: InputSpec, path: str, limit: int) -> LoadedInputs:
    """The records of the run at ``path`` (``spec.run``), with the texts and judgments
    ``spec`` names."""
    queries_path, corpus_path, qrels_path = _texts_of(spec)
    ranked = _ranked(read_run(path).frame, spec.depth)
    _check_lines(ranked, path)
    qids, docnos, scores = (ranked.get_column(c).to_list() for c in ("qid", "docno", "score"))
    firsts: dict[str, str] = {}  # each query's first document, queries in order
    for qid, docno in zip(qids, docnos, strict=True):
        firsts.setdefault(qid, docno)
    queries = docs = qrels = None
    if queries_path is not None:
        queries = read_queries(os.fspath(queries_path), set(firsts), limit)
        for qid, docno in firsts.items():
            if qid not in queries:
                raise _missing("query", qid, f"the queries file {queries_path}", path, qid,
                               docno)
    if corpus_path is not None:
        docs = read_corpus(os.fspath(corpus_path), set(docnos), limit)
        for qid, docno in zip(qids, docnos, strict=True):
            if docno not in docs:
                raise _missing("document", docno, f"the corpus {corpus_path}", path, qid, docno)
    if qrels_path is not None:
        qrels = read_beir_qrels(qrels_path, limit)
        if not qrels.keys() & firsts.keys():
            raise InputError(f"no query of the run {path} is judged in this qrels file (another "
                             "split?)", path=qrels_path)
    records = _records(qids, docnos, scores, queries, docs)
    if qrels is None:
        return LoadedInputs(records, path)
    return LoadedInputs(records, path, "beir-qrels", qrels=qrels, qrels_path=qrels_path)


def _records(qids: list[str], docnos: list[str], scores: list[float],
             queries: dict[str, str] | None, docs: dict[str, str] | None) -> list[Record]:
    """One record per query, not judged yet; the lines come grouped by query, in rank
    order."""
    records: list[Record] = []
    start = 0
    for end in range(1, len(qids) + 1):
        if end < len(qids) and qids[end] == qids[start]:
            continue
        qid = qids[start]
        contexts = tuple(Context(docnos[i], docs[docnos[i]] if docs is not None else "",
                                 scores[i]) for i in range(start, end))
        records.append(Record(
            id=qid,
            query=queries[qid] if queries is not None else None,
            contexts=contexts,
        ))
        start = end
    return records
