"""Tests for rageval.inputs: records built from a TREC run, with BEIR and TSV texts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trec_inputs import CORPUS, QUERIES, RUN, beir_dir, jsonl, run_file

from rageval.core.errors import InputError, UsageError
from rageval.inputs import InputSpec, load_inputs
from rageval.retrieval.ranking import Ranking


def load(**options: Any) -> tuple[list[dict[str, Any]], str | None]:
    loaded = load_inputs(InputSpec(**options))
    assert loaded.source == options["run"]
    return [r.to_dict() for r in loaded.records], loaded.judgments_source


def error_of(**options: Any) -> InputError:
    with pytest.raises(InputError) as caught:
        load_inputs(InputSpec(**options))
    return caught.value


def test_beir_directory_join(tmp_path: Path) -> None:
    run = run_file(tmp_path)
    out, source = load(run=run, beir=str(beir_dir(tmp_path / "beir")))
    assert source == "beir-qrels"
    assert out == [
        {"id": "q2", "query": "second query",  # not in the qrels: not judged
         "contexts": [{"id": "d3", "text": "doc three", "score": 5.0},  # tie: docno descending
                      {"id": "d1", "text": "Title One doc one", "score": 5.0}]},
        {"id": "q1", "query": "first query",
         "contexts": [{"id": "d2", "text": "doc two", "score": 9.0},  # by score, not rank
                      {"id": "d1", "text": "Title One doc one", "score": 3.0},
                      {"id": "d3", "text": "doc three", "score": 1.0}],
         "judgments": {"d1": 1, "d7": 2}},  # every judgment of the query, retrieved or not
    ]


def test_depth_keeps_the_top_results_ties_cut_in_docno_order(tmp_path: Path) -> None:
    run = run_file(tmp_path)
    out, _ = load(run=run, beir=str(beir_dir(tmp_path / "beir")), depth=1)
    assert [[c["id"] for c in r["contexts"]] for r in out] == [["d3"], ["d2"]]
    out, _ = load(run=run, depth=2)
    assert [[c["id"] for c in r["contexts"]] for r in out] == [["d3", "d1"], ["d2", "d1"]]


def test_interleaved_run_lines_and_no_texts(tmp_path: Path) -> None:
    run = run_file(tmp_path, "b Q0 x 1 1 r\na Q0 y 1 2 r\nb Q0 z 2 3 r\na Q0 w 2 1 r\n")
    out, source = load(run=run)
    assert source is None
    assert out == [
        {"id": "b", "contexts": [{"id": "z", "text": "", "score": 3.0},
                                 {"id": "x", "text": "", "score": 1.0}]},
        {"id": "a", "contexts": [{"id": "y", "text": "", "score": 2.0},
                                 {"id": "w", "text": "", "score": 1.0}]},
    ]


def test_tsv_queries_and_corpus(tmp_path: Path) -> None:
    run = run_file(tmp_path)
    queries = tmp_path / "topics.tsv"
    queries.write_text("q1\tfirst query\r\nq2\tsecond\tquery\n\n")
    corpus = tmp_path / "collection.tsv"
    corpus.write_text("d1\tone\td2\tnot a doc\nd2\ttwo\nd3\t\nd4 has no tab\n")
    out, source = load(run=run, queries=str(queries), corpus=str(corpus))
    assert source is None
    assert [r["query"] for r in out] == ["second\tquery", "first query"]
    assert {c["id"]: c["text"] for r in out for c in r["contexts"]} == {
        "d1": "one\td2\tnot a doc", "d2": "two", "d3": ""}  # all after the first tab


def test_corpus_read_line_by_line_when_polars_cannot(tmp_path: Path) -> None:
    # A raw \x1f in a TSV line defeats the columnar scan: the exact reader takes over.
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tone\x1fmore\nd2\ttwo\nd3\tthree\n")
    out, _ = load(run=run_file(tmp_path), corpus=str(corpus))
    assert out[0]["contexts"][1] == {"id": "d1", "text": "one\x1fmore", "score": 5.0}


def test_big_corpus_keeps_only_retrieved_documents(tmp_path: Path) -> None:
    docs = [{"_id": f"doc{i}", "text": f"text {i}"} for i in range(20000)]
    docs[12345] = {"_id": 12345, "text": "an integer id"}
    corpus = jsonl(tmp_path / "corpus.jsonl", docs)
    run = run_file(tmp_path, "q Q0 doc19999 1 3 r\nq Q0 12345 2 2 r\nq Q0 doc7 3 1 r\n")
    out, _ = load(run=run, corpus=str(corpus))
    assert [c["text"] for c in out[0]["contexts"]] == ["text 19999", "an integer id", "text 7"]


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_a_document_missing_from_the_corpus(tmp_path: Path) -> None:
    run = run_file(tmp_path)
    corpus = jsonl(tmp_path / "c.jsonl", CORPUS[:2])
    error = error_of(run=run, corpus=str(corpus))
    assert (error.path, error.line) == (run, 1)
    assert "document 'd3' is not in the corpus" in error.message


def test_a_query_missing_from_the_queries(tmp_path: Path) -> None:
    run = run_file(tmp_path)
    queries = jsonl(tmp_path / "q.jsonl", QUERIES[:1])
    error = error_of(run=run, queries=str(queries))
    assert (error.path, error.line) == (run, 1) and "query 'q2'" in error.message


def test_a_document_retrieved_twice(tmp_path: Path) -> None:
    run = run_file(tmp_path, RUN + "q1 Q0 d2 4 0.5 bm25\n")
    error = error_of(run=run)
    assert (error.path, error.line) == (run, 6) and "retrieved twice" in error.message


@pytest.mark.parametrize(("lines", "line", "field", "says"), [
    (['{"_id": "d1", "text": "a"}', '{"_id": "d2", "text": '], 2, None, "malformed JSON"),
    (['{"_id": "d1", "text": "a"}', '{"_id": "d2", "body": "b"}'], 2, "text", "missing"),
    (['{"_id": "d1", "text": "a"}', '{"_id": "d2", "text": 5}'], 2, "text", "a string"),
    (['{"_id": "d1", "text": "a"}', '{"_id": "d2", "text": "b", "title": 1}'], 2, "title",
     "a string"),
    (['{"_id": "d1", "text": "a"}', '{"_id": "d1", "text": "b"}'], 2, None, "duplicate"),
    (['{"_id": "d1", "text": "a"}', '["d2", "b"]'], 2, None, "a JSON object"),
])
def test_bad_corpus_lines(tmp_path: Path, lines: list[str], line: int, field: str | None,
                          says: str) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    error = error_of(run=run_file(tmp_path, "q Q0 d1 1 2 r\nq Q0 d2 2 1 r\n"),
                     corpus=str(corpus))
    assert (error.path, error.line, error.field) == (str(corpus), line, field)
    assert says in error.message


def test_bad_tsv_lines(tmp_path: Path) -> None:
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tone\nd2\n")
    error = error_of(run=run_file(tmp_path, "q Q0 d2 1 1 r\n"), corpus=str(corpus))
    assert (error.line, "docid<TAB>text" in error.message) == (2, True)
    queries = tmp_path / "q.tsv"
    queries.write_text("\tno id\n")
    error = error_of(run=run_file(tmp_path, "q Q0 d2 1 1 r\n"), queries=str(queries))
    assert (error.path, error.line, error.field) == (str(queries), 1, "qid")


@pytest.mark.parametrize(("qrels", "line", "field", "says"), [
    ("query-id\tcorpus-id\tscore\nq1\td1\tx\n", 2, "score", "integer score"),
    ("query-id\tcorpus-id\tscore\nq1\td1\n", 2, None, "3 tab-separated fields"),
    ("query-id\tcorpus-id\tscore\nq1\t\t1\n", 2, "corpus-id", "empty id"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t100000\n", 2, "score", "outside"),
    ("q1\td1\t1\n", 1, None, "header"),
])
def test_bad_beir_qrels(tmp_path: Path, qrels: str, line: int, field: str | None,
                        says: str) -> None:
    beir = beir_dir(tmp_path / "beir", qrels=qrels)
    error = error_of(run=run_file(tmp_path), beir=str(beir))
    assert (error.path, error.line, error.field) == (
        str(beir / "qrels" / "test.tsv"), line, field)
    assert says in error.message


def test_beir_split_and_missing_files(tmp_path: Path) -> None:
    run = run_file(tmp_path)
    beir = beir_dir(tmp_path / "beir", split="dev")
    out, _ = load(run=run, beir=str(beir), split="dev")
    assert out[1]["judgments"] == {"d1": 1, "d7": 2}
    error = error_of(run=run, beir=str(beir))
    assert (error.path, error.message) == (str(beir / "qrels" / "test.tsv"), "file not found")
    (beir / "corpus.jsonl").unlink()
    error = error_of(run=run, beir=str(beir), split="dev")
    assert (error.path, error.message) == (str(beir / "corpus.jsonl"), "file not found")
    error = error_of(run=run, beir=str(tmp_path / "nowhere"))
    assert error.message == "BEIR directory not found"


def test_qrels_judging_no_query_of_the_run(tmp_path: Path) -> None:
    beir = beir_dir(tmp_path / "beir", qrels="query-id\tcorpus-id\tscore\nq9\td1\t1\n")
    error = error_of(run=run_file(tmp_path), beir=str(beir))
    assert "no query of the run" in error.message


def test_a_score_that_is_not_finite(tmp_path: Path) -> None:
    run = run_file(tmp_path, "q Q0 d1 1 2 r\nq Q0 d2 2 inf r\n")
    error = error_of(run=run)
    assert (error.path, error.line, error.field) == (run, 2, "score")


def test_run_errors_come_from_the_trec_reader(tmp_path: Path) -> None:
    error = error_of(run=run_file(tmp_path, "q Q0 d1 1\n"))
    assert error.line == 1
    assert error_of(run=str(tmp_path / "none.trec")).message == "file not found"


@pytest.mark.parametrize(("options", "says"), [
    ({"records": "r.jsonl"}, "not both"),
    ({"field_map": (("query", "q"),)}, "field map"),
    ({"format": "jsonl"}, "format"),
    ({"beir": "b", "corpus": "c"}, "BEIR directory"),
    ({"depth": 0}, "depth"),
    ({"depth": True}, "depth"),
    ({"split": ""}, "split"),
])
def test_usage_errors(tmp_path: Path, options: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        load_inputs(InputSpec(run=run_file(tmp_path), **options))


def test_describe_a_run() -> None:
    spec = InputSpec(run="run.trec", beir="beir", split="dev", depth=10)
    assert spec.describe() == {"run": "run.trec", "beir": "beir",
                               "qrels": str(Path("beir") / "qrels" / "dev.tsv")}
    spec = InputSpec(run="run.trec", queries="q.tsv", corpus="c.tsv")
    assert spec.describe() == {"run": "run.trec", "queries": "q.tsv", "corpus": "c.tsv"}


# --------------------------------------------------------------------------------------------
# The rank order is rageval's trec_eval order
# --------------------------------------------------------------------------------------------

RUN_LINES = st.lists(
    st.tuples(st.sampled_from(["q1", "q2", "q10"]), st.sampled_from(["a", "b", "B", "ab", "c2"]),
              st.sampled_from([0.5, 1.0, 1.0, 2.0, -3.0])),
    min_size=1, max_size=25, unique_by=lambda line: line[:2])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=RUN_LINES, depth=st.one_of(st.none(), st.integers(1, 4)))
def test_rank_order_matches_the_trec_eval_ranking(
        tmp_path: Path, lines: list[tuple[str, str, float]], depth: int | None) -> None:
    # Every retrieved document judged with its own grade: the grades of rageval's Ranking (the
    # retrieval metrics' input) then spell out its document order, ties included.
    run = tmp_path / "prop.trec"
    run.write_text("".join(f"{q} Q0 {d} {i} {s} r\n" for i, (q, d, s) in enumerate(lines)))
    codes = {(q, d): i + 1 for i, (q, d, _) in enumerate(lines)}
    qrels = tmp_path / "prop.qrels"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in codes.items()))
    ranking = Ranking.from_trec(str(qrels), str(run), max_retrieved=depth)
    expected: dict[str, list[str]] = {}
    for i, qid in enumerate(ranking.qids):
        grades = ranking.grades[ranking.offsets[i]:ranking.offsets[i + 1]].tolist()
        by_code = {g: d for (q, d), g in codes.items() if q == qid}
        expected[qid] = [by_code[g] for g in grades]
    out, _ = load(run=str(run), depth=depth)
    assert {r["id"]: [c["id"] for c in r["contexts"]] for r in out} == expected
    assert [r["id"] for r in out] == list(dict.fromkeys(q for q, _, _ in lines))
