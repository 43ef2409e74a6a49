"""A TREC run, a BEIR dataset (queries, corpus, qrels) and the files they are written to: the
inputs of the tests that join a run with its texts (the input layer's, the command line's and
the evaluation file's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RUN = """\
q2 Q0 d3 1 5.0 bm25
q2 Q0 d1 2 5.0 bm25
q1 Q0 d1 1 3.0 bm25
q1 Q0 d2 2 9.0 bm25
q1 Q0 d3 3 1.0 bm25
"""
QUERIES = [{"_id": "q1", "text": "first query", "metadata": {}},
           {"_id": "q2", "text": "second query"}, {"_id": "q3", "text": "not in the run"}]
CORPUS = [{"_id": "d1", "title": "Title One", "text": "doc one"},
          {"_id": "d2", "title": "", "text": "doc two"},
          {"_id": "d3", "text": "doc three"},
          {"_id": "d9", "title": "t", "text": "never retrieved"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td7\t2\nq4\td1\t1\n"


def jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def beir_dir(root: Path, *, qrels: str = QRELS, split: str = "test",
             corpus: list[Any] | None = None) -> Path:
    (root / "qrels").mkdir(parents=True)
    jsonl(root / "queries.jsonl", QUERIES)
    jsonl(root / "corpus.jsonl", CORPUS if corpus is None else corpus)
    (root / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return root


def run_file(tmp_path: Path, text: str = RUN) -> str:
    path = tmp_path / "run.trec"
    path.write_text(text, encoding="utf-8")
    return str(path)
