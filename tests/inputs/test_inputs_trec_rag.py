"""Tests for rageval.inputs: TREC RAG 2024 generation runs (kind="trec-rag")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rageval.core.errors import InputError, UsageError
from rageval.inputs import InputSpec, load_inputs
from rageval.judge.claims.citation_text import read_citations

SAMPLE = Path(__file__).parents[1] / "data" / "inputs" / "trec_rag_2024_sample.jsonl"


def topic(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": "r1", "topic_id": "t1", "topic": "what is a?",
        "references": ["s#0", "s#1", "s#2"], "response_length": 6,
        "answer": [{"text": "A is a.", "citations": [0]}, {"text": "B is b.", "citations": [2]},
                   {"text": "So it goes.", "citations": [1, 0]}],
    }
    row.update(changes)
    return row


def write(path: Path, rows: list[Any]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def records(path: str, **options: Any) -> list[dict[str, Any]]:
    loaded = load_inputs(InputSpec(records=path, kind="trec-rag", **options))
    assert loaded.source == path and loaded.judgments_source is None
    return [record.to_dict() for record in loaded.records]


def error_of(path: str, **options: Any) -> InputError:
    with pytest.raises(InputError) as caught:
        load_inputs(InputSpec(records=path, kind="trec-rag", **options))
    return caught.value


def test_the_sample_run() -> None:
    out = records(str(SAMPLE))
    assert [r["id"] for r in out] == ["2024-105741", "2024-145979"]
    first = out[0]
    assert first["query"] == "why do cats purr"
    assert [c["id"] for c in first["contexts"]] == [
        "msmarco_v2.1_doc_10_1#0_1", "msmarco_v2.1_doc_10_1#1_2", "msmarco_v2.1_doc_22_7#4_9"]
    assert all(c["text"] == "" for c in first["contexts"])
    assert first["answer"] == ("Cats purr when they are content. [1][3] They also purr to "
                               "soothe themselves when hurt. [2] Nobody is fully sure how.")
    assert (first["run_id"], first["response_length"]) == ("sample-run", 21)


def test_markers_are_read_back_as_the_cited_references() -> None:
    first = records(str(SAMPLE))[0]
    ids = [c["id"] for c in first["contexts"]]
    statements = read_citations(first["answer"], ids, max_citations=None)
    assert [s.cites for s in statements] == [(ids[0], ids[2]), (ids[1],), ()]
    assert [s.text for s in statements] == ["Cats purr when they are content.",
                                            "They also purr to soothe themselves when hurt.",
                                            "Nobody is fully sure how."]


def test_numeric_reference_ids_are_cited_by_id(tmp_path: Path) -> None:
    # rageval reads a marker as a context id first: [1] would name the reference "1".
    row = topic(references=["2", "1", "x"],
                answer=[{"text": "One.", "citations": [0]}, {"text": "Two.", "citations": [1]},
                        {"text": "Three.", "citations": [2]}])
    answer = records(write(tmp_path / "r.jsonl", [row]))[0]["answer"]
    assert answer == "One. [2] Two. [1] Three. [3]"
    statements = read_citations(answer, ["2", "1", "x"], max_citations=None)
    assert [s.cites for s in statements] == [("2",), ("1",), ("x",)]


def test_corpus_texts_are_joined_in(tmp_path: Path) -> None:
    corpus = tmp_path / "segments.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in [
        {"docid": "s#0", "title": "Doc", "segment": "zero", "url": "u"},
        {"docid": "s#1", "title": "", "segment": "one"},
        {"docid": "s#2", "segment": "two"},
        {"docid": "s#9", "segment": "unused"},
    ]))
    out = records(write(tmp_path / "r.jsonl", [topic()]), corpus=str(corpus))
    assert [c["text"] for c in out[0]["contexts"]] == ["Doc zero", "one", "two"]


def test_a_reference_missing_from_the_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"_id": "s#0", "text": "zero"}) + "\n")
    path = write(tmp_path / "r.jsonl", [topic()])
    error = error_of(path, corpus=str(corpus))
    assert (error.path, error.line, error.field) == (path, 1, "references[1]")
    assert "'s#1' is not in the corpus" in error.message


@pytest.mark.parametrize(("changes", "field", "says"), [
    ({"answer": [{"text": "a", "citations": []}, {"text": "b", "citations": []},
                 {"text": "c", "citations": [3]}]}, "answer[2].citations[0]", "out of range"),
    ({"answer": [{"text": "a", "citations": [0, -1]}]}, "answer[0].citations[1]", "out of range"),
    ({"answer": [{"text": "a", "citations": ["0"]}]}, "answer[0].citations[0]", "an integer"),
    ({"answer": [{"text": "a", "citations": [True]}]}, "answer[0].citations[0]", "an integer"),
    ({"answer": [{"text": "a", "citations": 0}]}, "answer[0].citations", "a list"),
    ({"answer": [{"text": 5, "citations": []}]}, "answer[0].text", "a string"),
    ({"answer": ["a sentence"]}, "answer[0]", "an object"),
    ({"answer": "a plain string"}, "answer", "a list of sentences"),
    ({"references": "s#0"}, "references", "a list"),
    ({"references": ["s#0", ""]}, "references[1]", "non-empty string"),
    ({"references": ["s#0", "s#0"]}, "references[1]", "duplicate reference"),
    ({"topic_id": None}, "topic_id", "non-empty string or an integer"),
    ({"topic": 5}, "topic", "a string"),
    ({"run_id": 3}, "run_id", "non-empty string"),
    ({"query": "x"}, "query", "rageval field"),
])
def test_bad_values_name_line_and_field(tmp_path: Path, changes: dict[str, Any], field: str,
                                        says: str) -> None:
    path = write(tmp_path / "r.jsonl", [topic(), topic(**{"topic_id": "t2", **changes})])
    error = error_of(path)
    assert (error.path, error.line, error.field) == (path, 2, field)
    assert says in error.message


@pytest.mark.parametrize("key", ["topic_id", "references", "answer"])
def test_missing_required_keys(tmp_path: Path, key: str) -> None:
    row = topic()
    del row[key]
    error = error_of(write(tmp_path / "r.jsonl", [row]))
    assert (error.line, error.field) == (1, key) and "missing required field" in error.message


def test_several_runs_in_one_file(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [topic(), topic(topic_id="t2"),
                                        topic(topic_id="t3", run_id="r2")])
    error = error_of(path)
    assert (error.line, error.field) == (3, "run_id")
    assert "'r2'" in error.message and "line 1" in error.message and "'r1'" in error.message


def test_duplicate_topics_and_malformed_lines(tmp_path: Path) -> None:
    error = error_of(write(tmp_path / "d.jsonl", [topic(), topic()]))
    assert (error.line, error.field) == (2, "topic_id") and "duplicate" in error.message
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(topic()) + "\n\n{\"topic_id\": \n")
    assert error_of(str(path)).line == 3
    error = error_of(write(tmp_path / "n.jsonl", [topic(), [1, 2]]))
    assert error.line == 2 and "record object" in error.message


def test_integer_topic_ids_and_any_extension(tmp_path: Path) -> None:
    path = write(tmp_path / "run-without-extension", [topic(topic_id=2027497)])
    out = records(path)
    assert out[0]["id"] == "2027497"


def test_empty_sentences_and_whitespace(tmp_path: Path) -> None:
    row = topic(answer=[{"text": "  A.  ", "citations": [0]}, {"text": "", "citations": [1]},
                        {"text": "B."}])
    assert records(write(tmp_path / "r.jsonl", [row]))[0]["answer"] == "A. [1] [2] B."


def test_json_array_format_and_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps([topic()]))
    assert records(str(path), format="json")[0]["id"] == "t1"
    with pytest.raises(UsageError, match="JSON Lines"):
        load_inputs(InputSpec(records=str(path), kind="trec-rag", format="csv"))
    with pytest.raises(UsageError, match="field map"):
        load_inputs(InputSpec(records=str(path), kind="trec-rag", field_map=(("id", "x"),)))
    assert error_of(str(tmp_path / "missing.jsonl")).message == "file not found"


def test_describe_names_the_corpus() -> None:
    spec = InputSpec(records="run.jsonl", kind="trec-rag", corpus="segments.jsonl")
    assert spec.describe() == {"records": "run.jsonl", "kind": "trec-rag", "map": {},
                               "corpus": "segments.jsonl"}
