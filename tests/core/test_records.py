"""Tests for loading and validating records (rageval.core.records)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval.core.errors import InputError, UsageError
from rageval.core.records import (
    Context,
    Record,
    apply_judgments,
    iter_records,
    load_records,
    records_from_dicts,
)

SAMPLE: dict[str, Any] = {
    "id": "q1",
    "query": "What are the company's main revenue sources?",
    "contexts": [
        {"id": "d3", "text": "Revenue comes from ads.", "score": 12.7, "source": "10-K"},
        {"id": "d9", "text": ""},
    ],
    "answer": "Mostly advertising.",
    "reference": "Advertising.",
    "judgments": {"d3": 2, "d7": 1},
    "metadata": {"split": "dev"},
}

HYPOTHESIS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def write_jsonl(path: Path, items: list[Any]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def load_error(path: Path, **kwargs: Any) -> InputError:
    with pytest.raises(InputError) as info:
        load_records(path, **kwargs)
    return info.value


def assert_error(error: InputError, path: Path, line: int | None, field: str | None) -> None:
    assert (error.path, error.line, error.field) == (str(path), line, field), str(error)


# --------------------------------------------------------------------------------------------
# JSONL: valid input
# --------------------------------------------------------------------------------------------


def test_load_full_record(tmp_path: Path) -> None:
    (record,) = load_records(write_jsonl(tmp_path / "r.jsonl", [SAMPLE]))
    assert record.id == "q1"
    assert record.query == SAMPLE["query"]
    assert record.contexts == (
        Context("d3", "Revenue comes from ads.", 12.7, {"source": "10-K"}),
        Context("d9", ""),
    )
    assert record.contexts[0].metadata == {"source": "10-K"}
    assert record.answer == "Mostly advertising."
    assert record.references == ("Advertising.",)
    assert record.reference == "Advertising."
    assert record.judgments == {"d3": 2, "d7": 1}
    assert record.extra == {"metadata": {"split": "dev"}}


def test_minimal_record_defaults(tmp_path: Path) -> None:
    (record,) = load_records(write_jsonl(tmp_path / "r.jsonl", [{"id": "a"}]))
    assert record == Record("a")
    assert (record.query, record.contexts, record.answer) == (None, (), None)
    assert (record.references, record.reference, record.judgments) == ((), None, None)
    assert record.extra == {}


def test_nulls_mean_absent(tmp_path: Path) -> None:
    item = {"id": "a", "query": None, "contexts": None, "answer": None, "reference": None}
    (record,) = load_records(write_jsonl(tmp_path / "r.jsonl", [{**item, "judgments": None}]))
    assert record == Record("a")


def test_string_contexts_get_positional_ids(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "a", "contexts": ["x", "y", "z"]}])
    (record,) = load_records(path)
    assert [c.id for c in record.contexts] == ["1", "2", "3"]
    assert [c.text for c in record.contexts] == ["x", "y", "z"]
    assert all(c.score is None and c.metadata == {} for c in record.contexts)


def test_integer_ids_become_strings(tmp_path: Path) -> None:
    item = {"id": 7, "contexts": [{"id": 12, "text": "t", "score": 3}]}
    (record,) = load_records(write_jsonl(tmp_path / "r.jsonl", [item]))
    assert record.id == "7"
    assert record.contexts[0].id == "12"
    assert record.contexts[0].score == 3.0
    assert isinstance(record.contexts[0].score, float)


def test_reference_list(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "a", "reference": ["one", "two"]}])
    (record,) = load_records(path)
    assert record.references == ("one", "two")
    assert record.reference == "one"


def test_empty_judgments_differ_from_none(tmp_path: Path) -> None:
    items = [{"id": "a", "judgments": {}}, {"id": "b"}, {"id": "c", "judgments": None}]
    a, b, c = load_records(write_jsonl(tmp_path / "r.jsonl", items))
    assert a.judgments == {}
    assert a.judgments is not None
    assert b.judgments is None
    assert c.judgments is None
    assert a.to_dict()["judgments"] == {}
    assert "judgments" not in b.to_dict()


def test_negative_and_integral_float_grades(tmp_path: Path) -> None:
    item = {"id": "a", "judgments": {"d1": -1, "d2": 2.0}}
    (record,) = load_records(write_jsonl(tmp_path / "r.jsonl", [item]))
    assert record.judgments == {"d1": -1, "d2": 2}
    assert all(type(grade) is int for grade in record.judgments.values())


def test_blank_lines_and_bom_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a"}\n\n   \r\n{"id": "b"}\r\n\n')
    assert [r.id for r in load_records(path)] == ["a", "b"]


def test_error_line_counts_blank_lines(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", ['{"id": "a"}', "", "", '{"id": 1.5}'])
    assert_error(load_error(path), path, 4, "id")


def test_records_are_read_only(tmp_path: Path) -> None:
    (record,) = load_records(write_jsonl(tmp_path / "r.jsonl", [SAMPLE]))
    with pytest.raises(AttributeError):
        record.id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.judgments["d3"] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        record.extra["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        record.contexts[0].metadata["x"] = 1  # type: ignore[index]


def test_direct_construction_copies_and_freezes() -> None:
    metadata = {"k": 1}
    judgments = {"d": 1}
    context = Context("d", "t", metadata=metadata)
    record = Record("a", contexts=[context], references=["r"], judgments=judgments)  # type: ignore[arg-type]
    metadata["k"] = 2
    judgments["d"] = 5
    assert context.metadata == {"k": 1}
    assert record.judgments == {"d": 1}
    assert record.contexts == (context,)
    assert record.references == ("r",)


def test_direct_construction_rejects_reserved_keys() -> None:
    with pytest.raises(UsageError):
        Context("d", "t", metadata={"score": 1})
    with pytest.raises(UsageError):
        Record("a", extra={"query": "q"})


def test_iter_records_streams(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", ['{"id": "a"}', '{"id": "b"}', "not json"])
    stream = iter_records(path)
    assert next(stream).id == "a"
    assert next(stream).id == "b"
    with pytest.raises(InputError) as info:
        next(stream)
    assert_error(info.value, path, 3, None)


# --------------------------------------------------------------------------------------------
# JSONL: errors name path, line and field
# --------------------------------------------------------------------------------------------


def test_malformed_json_names_column(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", ['{"id": "a"}', '{"id": "b",, "query": "x"}'])
    error = load_error(path)
    assert_error(error, path, 2, None)
    assert "malformed JSON" in error.message
    assert "(column 12)" in error.message


def test_line_not_an_object(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", ['{"id": "a"}', "[1, 2]"])
    error = load_error(path)
    assert_error(error, path, 2, None)
    assert "object" in error.message
    assert "array [1, 2]" in error.message


def test_missing_id(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", ['{"query": "q"}'])
    error = load_error(path)
    assert_error(error, path, 1, "id")
    assert "missing" in error.message


@pytest.mark.parametrize(
    ("item", "field", "found"),
    [
        ({"id": 1.5}, "id", "number 1.5"),
        ({"id": True}, "id", "boolean True"),
        ({"id": None}, "id", "null"),
        ({"id": ""}, "id", "string ''"),
        ({"id": "a", "query": 3}, "query", "integer 3"),
        ({"id": "a", "answer": ["x"]}, "answer", "array ['x']"),
        ({"id": "a", "reference": []}, "reference", "array []"),
        ({"id": "a", "reference": 5}, "reference", "integer 5"),
        ({"id": "a", "reference": ["ok", 2]}, "reference[1]", "integer 2"),
        ({"id": "a", "contexts": "text"}, "contexts", "string 'text'"),
        ({"id": "a", "contexts": ["x", 3]}, "contexts[1]", "integer 3"),
        ({"id": "a", "contexts": [{"text": "t"}]}, "contexts[0].id", "missing"),
        ({"id": "a", "contexts": [{"id": "d"}]}, "contexts[0].text", "missing"),
        ({"id": "a", "contexts": [{"id": [1], "text": "t"}]}, "contexts[0].id", "array [1]"),
        ({"id": "a", "contexts": [{"id": "d", "text": 1}]}, "contexts[0].text", "integer 1"),
        (
            {"id": "a", "contexts": [{"id": "d", "text": "t", "score": True}]},
            "contexts[0].score",
            "boolean True",
        ),
        (
            {"id": "a", "contexts": [{"id": "d", "text": "t", "score": "1"}]},
            "contexts[0].score",
            "string '1'",
        ),
        ({"id": "a", "judgments": [1]}, "judgments", "array [1]"),
        ({"id": "a", "judgments": {"d3": 1.5}}, "judgments.d3", "number 1.5"),
        ({"id": "a", "judgments": {"d3": "2"}}, "judgments.d3", "string '2'"),
        ({"id": "a", "judgments": {"d3": True}}, "judgments.d3", "boolean True"),
        ({"id": "a", "judgments": {"d3": None}}, "judgments.d3", "null"),
    ],
)
def test_mistyped_fields(tmp_path: Path, item: dict[str, Any], field: str, found: str) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "ok"}, item])
    error = load_error(path)
    assert_error(error, path, 2, field)
    assert found in error.message
    if found != "missing":
        assert "expected" in error.message


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_scores_rejected(tmp_path: Path, literal: str) -> None:
    line = f'{{"id": "a", "contexts": [{{"id": "d", "text": "t", "score": {literal}}}]}}'
    path = write_lines(tmp_path / "r.jsonl", [line])
    assert_error(load_error(path), path, 1, "contexts[0].score")


def test_duplicate_context_ids(tmp_path: Path) -> None:
    contexts = [{"id": "d1", "text": "a"}, {"id": "d2", "text": "b"}, {"id": "d1", "text": "c"}]
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "a", "contexts": contexts}])
    error = load_error(path)
    assert_error(error, path, 1, "contexts[2].id")
    assert "'d1'" in error.message
    assert "contexts[0]" in error.message
    assert "contexts[2]" in error.message


def test_duplicate_context_ids_after_int_conversion(tmp_path: Path) -> None:
    contexts = [{"id": 1, "text": "a"}, {"id": "1", "text": "b"}]
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "a", "contexts": contexts}])
    assert_error(load_error(path), path, 1, "contexts[1].id")


def test_duplicate_record_ids_name_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "a"}, {"id": "b"}, {"id": "a"}])
    error = load_error(path)
    assert_error(error, path, 3, "id")
    assert "'a'" in error.message
    assert "line 1" in error.message


def test_duplicate_record_ids_int_and_string(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": 1}, {"id": "1"}])
    assert_error(load_error(path), path, 2, "id")


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"\xef\xbb\xbf"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    error = load_error(path)
    assert_error(error, path, None, None)
    assert "contains no records" in error.message


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "b\xff"}\n')
    error = load_error(path)
    assert_error(error, path, 2, None)
    assert "UTF-8" in error.message


def test_file_not_found(tmp_path: Path) -> None:
    path = tmp_path / "missing.jsonl"
    with pytest.raises(InputError) as info:
        iter_records(path)  # reported at once, before iteration
    assert_error(info.value, path, None, None)
    assert "not found" in info.value.message


def test_directory_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "dir.jsonl"
    path.mkdir()
    assert_error(load_error(path), path, None, None)


def test_deeply_nested_json_is_an_input_error(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", ["[" * 100_000 + "]" * 100_000])
    assert_error(load_error(path), path, 1, None)


def test_unknown_extension_and_format(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.txt", [{"id": "a"}])
    assert_error(load_error(path), path, None, None)
    assert [r.id for r in load_records(path, format="jsonl")] == ["a"]
    with pytest.raises(UsageError):
        load_records(path, format="xml")


def test_error_message_is_rendered_with_location(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "a", "judgments": {"d3": "2"}}])
    text = str(load_error(path))
    assert text.startswith(f"{path}, line 1, field 'judgments.d3': expected")


# --------------------------------------------------------------------------------------------
# JSON arrays
# --------------------------------------------------------------------------------------------


def test_json_array_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps([SAMPLE, {"id": "q2"}], indent=2), encoding="utf-8")
    records = load_records(path)
    assert [r.id for r in records] == ["q1", "q2"]
    assert records[0] == records_from_dicts([SAMPLE])[0]


def test_json_extension_accepts_json_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.json", [{"id": "a"}, {"id": "b"}])
    assert [r.id for r in load_records(path)] == ["a", "b"]


def test_json_array_errors_name_element_line(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('[\n  {"id": "a"},\n  {"id": "b",\n   "query": 5}\n]\n', encoding="utf-8")
    assert_error(load_error(path), path, 3, "query")
    path.write_text('[\n  {"id": "a"},\n  7\n]', encoding="utf-8")
    assert_error(load_error(path), path, 3, None)
    path.write_text('[\n  {"id": "a"}\n  {"id": "b"}\n]', encoding="utf-8")
    assert_error(load_error(path), path, 3, None)
    path.write_text('[\n  {"id": "a"},\n  {"id": "b" "x"}\n]', encoding="utf-8")
    error = load_error(path)
    assert_error(error, path, 3, None)
    assert "column 14" in error.message
    path.write_text("  []  ", encoding="utf-8")
    assert "contains no records" in load_error(path).message


# --------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------


def test_csv_loading(tmp_path: Path) -> None:
    import csv

    path = tmp_path / "r.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "query", "answer", "reference", "contexts", "judgments", "label"])
        writer.writerow(["q1", "what?", "it", "ref", json.dumps(["a", "b"]), '{"1": 1}', "good"])
        writer.writerow(["q2", "", "", '["r1", "r2"]', json.dumps(SAMPLE["contexts"]), "{}", ""])
        writer.writerow(["3", "multi\nline", "", "", "", "", ""])
    q1, q2, q3 = load_records(path)
    assert q1 == Record(
        "q1",
        query="what?",
        contexts=(Context("1", "a"), Context("2", "b")),
        answer="it",
        references=("ref",),
        judgments={"1": 1},
        extra={"label": "good"},
    )
    assert q2.query is None and q2.answer is None
    assert q2.references == ("r1", "r2")
    assert q2.contexts == records_from_dicts([SAMPLE])[0].contexts
    assert q2.judgments == {}
    assert q2.extra == {}
    assert q3.id == "3" and q3.query == "multi\nline" and q3.judgments is None


def test_csv_errors_name_physical_line(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text('id,query,contexts\na,"two\nlines",\nb,q,"[1, 2]"\n', encoding="utf-8")
    assert_error(load_error(path), path, 4, "contexts[0]")
    path.write_text('id,contexts\na,"[""x"",]"\n', encoding="utf-8")
    error = load_error(path)
    assert_error(error, path, 2, "contexts")
    assert "malformed JSON" in error.message
    path.write_text('id,judgments\na,"{""d1"": ""2""}"\n', encoding="utf-8")
    assert_error(load_error(path), path, 2, "judgments.d1")
    # A reference cell is several references only when it is a JSON list of strings; anything
    # else starting with '[' (a citation marker, say) is one reference as written.
    path.write_text('id,reference\na,"[""x"", 3]"\nb,[1] see note\nc,"[""y"", ""z""]"\n',
                    encoding="utf-8")
    loaded = {r.id: r.references for r in load_records(path)}
    assert loaded == {"a": ('["x", 3]',), "b": ("[1] see note",), "c": ("y", "z")}
    path.write_text("id,query\na,q\nb\n", encoding="utf-8")
    assert_error(load_error(path), path, 3, None)
    path.write_text("id,query\na,q\na,r\n", encoding="utf-8")
    assert_error(load_error(path), path, 3, "id")
    path.write_text("id,query\n,q\n", encoding="utf-8")
    assert_error(load_error(path), path, 2, "id")


def test_csv_header_problems(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("query,answer\nq,a\n", encoding="utf-8")
    assert_error(load_error(path), path, 1, "id")
    path.write_text("id,id\na,b\n", encoding="utf-8")
    assert_error(load_error(path), path, 1, None)
    path.write_text("id,query\n", encoding="utf-8")
    assert "contains no records" in load_error(path).message
    path.write_text("", encoding="utf-8")
    assert "contains no records" in load_error(path).message


def test_csv_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_bytes(b"id,query\na,ok\nb,bad\xc3\n")
    assert_error(load_error(path), path, 3, None)


# --------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------


def test_parquet_with_struct_contexts(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pl.DataFrame(
        {
            "id": ["q1", "q2"],
            "query": ["what?", None],
            "contexts": [
                [{"id": "d1", "text": "a", "score": 1.5}, {"id": "d2", "text": "b", "score": None}],
                [],
            ],
            "reference": [["r1", "r2"], None],
            "judgments": [{"d1": 2, "d2": None}, None],
            "label": ["x", None],
        }
    ).write_parquet(path)
    q1, q2 = load_records(path)
    assert q1 == Record(
        "q1",
        query="what?",
        contexts=(Context("d1", "a", 1.5), Context("d2", "b")),
        references=("r1", "r2"),
        judgments={"d1": 2},
        extra={"label": "x"},
    )
    assert q2 == Record("q2")


def test_parquet_with_string_contexts_and_int_ids(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pl.DataFrame(
        {"id": [1, 2], "contexts": [["x", "y"], ["z"]], "judgments": ['{"1": 1}', "{}"]}
    ).write_parquet(path)
    a, b = load_records(path)
    assert a.id == "1" and [c.id for c in a.contexts] == ["1", "2"]
    assert a.judgments == {"1": 1}
    assert b.judgments == {}


def test_parquet_map_style_judgments(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    entries = [[{"key": "d1", "value": 2}, {"key": "d2", "value": -1}], []]
    pl.DataFrame({"id": ["a", "b"], "judgments": entries}).write_parquet(path)
    a, b = load_records(path)
    assert a.judgments == {"d1": 2, "d2": -1}
    assert b.judgments == {}


def test_parquet_errors_say_row(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pl.DataFrame(
        {"id": ["a", "b", "c"], "judgments": ['{"d": 1}', None, '{"d": 1.5}']}
    ).write_parquet(path)
    error = load_error(path)
    assert_error(error, path, 3, "judgments.d")
    assert "(row 3)" in error.message
    pl.DataFrame({"id": ["a", "b", "a"]}).write_parquet(path)
    error = load_error(path)
    assert_error(error, path, 3, "id")
    assert "row 1" in error.message
    pl.DataFrame({"query": ["q"]}).write_parquet(path)
    assert_error(load_error(path), path, None, "id")


def test_parquet_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    path.write_bytes(b"this is not parquet")
    assert_error(load_error(path), path, None, None)


# --------------------------------------------------------------------------------------------
# Python API and qrels
# --------------------------------------------------------------------------------------------


def test_records_from_dicts() -> None:
    records = records_from_dicts([SAMPLE, {"id": "q2"}])
    assert [r.id for r in records] == ["q1", "q2"]
    with pytest.raises(InputError) as info:
        records_from_dicts([{"id": "a"}, {"id": "b", "query": 1}], source="api")
    assert (info.value.path, info.value.line, info.value.field) == ("api", 2, "query")
    with pytest.raises(InputError) as info:
        records_from_dicts([{"id": "a"}, ["not", "a", "mapping"]])  # type: ignore[list-item]
    assert (info.value.path, info.value.line, info.value.field) == ("<memory>", 2, None)
    with pytest.raises(InputError, match="contains no records"):
        records_from_dicts([])


def test_apply_judgments() -> None:
    records = records_from_dicts([{"id": "a"}, {"id": "b"}, {"id": "c", "judgments": {"x": 1}}])
    qrels = {"a": {"d1": 2, "d2": 0}, "z": {"d9": 1}}
    a, b, c = apply_judgments(records, qrels, source="qrels.txt")
    assert a.judgments == {"d1": 2, "d2": 0}
    assert b.judgments is None
    assert c.judgments == {"x": 1}
    assert records[0].judgments is None  # originals untouched
    assert a.query is None and a.id == "a"


def test_apply_empty_qrels_entry_means_judged_nothing_relevant() -> None:
    (a,) = apply_judgments(records_from_dicts([{"id": "a"}]), {"a": {}}, source="q")
    assert a.judgments == {}


def test_apply_judgments_conflict_names_both_sources() -> None:
    records = records_from_dicts([{"id": "a"}, {"id": "q7", "judgments": {}}])
    with pytest.raises(InputError) as info:
        apply_judgments(records, {"q7": {"d": 1}}, source="run.qrels", records_source="r.jsonl")
    message = info.value.message
    assert "'q7'" in message and "run.qrels" in message and "r.jsonl" in message
    assert info.value.path == "run.qrels"


def test_apply_judgments_rejects_bad_grades() -> None:
    with pytest.raises(InputError) as info:
        apply_judgments(records_from_dicts([{"id": "a"}]), {"a": {"d": 1.5}}, source="q")
    assert info.value.field == "judgments.a.d"


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


def test_to_dict_round_trip(tmp_path: Path) -> None:
    items = [SAMPLE, {"id": 5, "contexts": ["a", "b"], "reference": ["x", "y"]}, {"id": "z"}]
    records = load_records(write_jsonl(tmp_path / "a.jsonl", items))
    again = load_records(write_jsonl(tmp_path / "b.jsonl", [r.to_dict() for r in records]))
    assert again == records
    assert records[1].to_dict() == {
        "id": "5",
        "contexts": [{"id": "1", "text": "a"}, {"id": "2", "text": "b"}],
        "reference": ["x", "y"],
    }


# --------------------------------------------------------------------------------------------
# Property tests
# --------------------------------------------------------------------------------------------

_RESERVED = {"id", "query", "contexts", "answer", "reference", "judgments", "text", "score"}
_keys = st.text(max_size=8).filter(lambda key: key not in _RESERVED)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_keys, children, max_size=3),
    max_leaves=6,
)
_ids = st.text(min_size=1, max_size=8) | st.integers()


@st.composite
def _context_lists(draw: st.DrawFn) -> list[Any]:
    if draw(st.booleans()):
        return draw(st.lists(st.text(max_size=20), max_size=4))
    ids = draw(st.lists(_ids, max_size=4, unique_by=str))
    contexts = []
    for context_id in ids:
        context: dict[str, Any] = {"id": context_id, "text": draw(st.text(max_size=20))}
        score = draw(st.none() | st.integers() | st.floats(allow_nan=False, allow_infinity=False))
        if score is not None:
            context["score"] = score
        context.update(draw(st.dictionaries(_keys, _json_values, max_size=2)))
        contexts.append(context)
    return contexts


_OPTIONAL_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "query": st.none() | st.text(max_size=20),
    "answer": st.none() | st.text(max_size=20),
    "reference": st.none() | st.text(max_size=20) | st.lists(st.text(max_size=10), min_size=1),
    "contexts": st.none() | _context_lists(),
    "judgments": st.none()
    | st.dictionaries(st.text(min_size=1, max_size=8), st.integers(-3, 5), max_size=4),
}


@st.composite
def record_dicts(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {"id": draw(_ids)}
    for name, strategy in _OPTIONAL_FIELDS.items():
        if draw(st.booleans()):
            item[name] = draw(strategy)
    item.update(draw(st.dictionaries(_keys, _json_values, max_size=2)))
    return item


def _dump(path: Path, items: list[Any]) -> Path:
    text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
    path.write_bytes(text.encode("utf-8"))
    return path


@HYPOTHESIS
@given(item=record_dicts())
def test_property_valid_records_round_trip(tmp_path: Path, item: dict[str, Any]) -> None:
    (expected,) = records_from_dicts([item])
    (loaded,) = load_records(_dump(tmp_path / "r.jsonl", [item]))
    assert loaded == expected
    (again,) = load_records(_dump(tmp_path / "r2.jsonl", [loaded.to_dict()]))
    assert again == loaded
    assert again.to_dict() == loaded.to_dict()


_garbage_lines = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=40).map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.dictionaries(
        st.sampled_from(["id", "query", "contexts", "answer", "reference", "judgments", "x"]),
        _json_values,
    ).map(lambda item: json.dumps(item).encode()),
    record_dicts().map(lambda item: json.dumps(item).encode()),
)


@HYPOTHESIS
@given(
    lines=st.lists(_garbage_lines, max_size=6),
    suffix=st.sampled_from([".jsonl", ".json", ".csv"]),
)
def test_property_garbage_raises_only_input_error(
    tmp_path: Path, lines: list[bytes], suffix: str
) -> None:
    path = tmp_path / f"garbage{suffix}"
    path.write_bytes(b"\n".join(lines))
    try:
        records = load_records(path)
    except InputError as error:
        assert error.path == str(path)
    else:
        assert records and all(isinstance(record, Record) for record in records)


def _bad_values(*kinds: str) -> st.SearchStrategy[Any]:
    pool: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(),
        "int": st.integers(),
        "float": st.floats().filter(lambda x: not (math.isfinite(x) and x.is_integer())),
        "str": st.text(max_size=5),
        "list": st.lists(st.integers(), max_size=2),
        "dict": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        "null": st.none(),
    }
    return st.one_of(*(pool[kind] for kind in kinds))


_RECORD_MUTATIONS: dict[str, st.SearchStrategy[Any]] = {
    "id": _bad_values("bool", "float", "list", "dict", "null"),
    "query": _bad_values("bool", "int", "float", "list", "dict"),
    "answer": _bad_values("bool", "int", "float", "list", "dict"),
    "reference": _bad_values("bool", "int", "float", "dict") | st.just([]),
    "contexts": _bad_values("bool", "int", "float", "str", "dict"),
    "judgments": _bad_values("bool", "int", "float", "str", "list"),
}


def _mutation_targets(item: dict[str, Any]) -> dict[str, tuple[Callable[[Any], None], Any]]:
    """Field path -> (setter, strategy of wrong-typed values)."""
    targets: dict[str, tuple[Callable[[Any], None], Any]] = {
        name: (lambda value, name=name: item.__setitem__(name, value), strategy)
        for name, strategy in _RECORD_MUTATIONS.items()
    }
    for index, context in enumerate(item.get("contexts") or []):
        prefix = f"contexts[{index}]"
        if isinstance(context, str):
            contexts = item["contexts"]
            targets[prefix] = (
                lambda value, i=index, c=contexts: c.__setitem__(i, value),
                _bad_values("bool", "int", "float", "list"),
            )
            continue
        bad = {
            "id": _bad_values("bool", "float", "list", "dict", "null"),
            "text": _bad_values("bool", "int", "float", "list", "dict", "null"),
            "score": _bad_values("bool", "str", "list", "dict")
            | st.sampled_from([math.nan, math.inf, -math.inf]),
        }
        for key, strategy in bad.items():
            targets[f"{prefix}.{key}"] = (
                lambda value, c=context, k=key: c.__setitem__(k, value),
                strategy,
            )
    for doc in item.get("judgments") or {}:
        judgments = item["judgments"]
        targets[f"judgments.{doc}"] = (
            lambda value, j=judgments, d=doc: j.__setitem__(d, value),
            _bad_values("bool", "float", "str", "list", "dict", "null"),
        )
    return targets


@HYPOTHESIS
@given(item=record_dicts(), data=st.data())
def test_property_mutated_field_is_named(
    tmp_path: Path, item: dict[str, Any], data: st.DataObject
) -> None:
    targets = _mutation_targets(item)
    field = data.draw(st.sampled_from(sorted(targets)), label="field")
    setter, strategy = targets[field]
    setter(data.draw(strategy, label="value"))
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(item) + "\n", encoding="utf-8")
    error = load_error(path)
    assert_error(error, path, 1, field)
