"""Tests for rageval.inputs: ragas / HF datasets tables, field maps, the records kind."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from rageval.core.errors import InputError
from rageval.core.records import load_records
from rageval.inputs import InputSpec, LoadedInputs, load_inputs

OLD_ROWS: list[dict[str, Any]] = [
    {"question": "What is X?", "contexts": ["X is a thing.", "Y too."], "answer": "A thing.",
     "ground_truth": "A thing", "source": "web"},
    {"question": "What is Z?", "contexts": [], "answer": "Zed.", "ground_truth": "zed"},
]
NEW_ROWS: list[dict[str, Any]] = [
    {"id": 7, "user_input": "What is X?", "retrieved_contexts": ["X is a thing."],
     "response": "A thing.", "reference": "A thing", "reference_contexts": ["X."]},
    {"id": "b", "user_input": "What is Z?", "retrieved_contexts": ["Z.", "Zed."],
     "response": "Zed.", "reference": "zed", "reference_contexts": []},
]


def write_jsonl(path: Path, rows: list[Any]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def load(path: str, kind: str = "ragas", **options: Any) -> list[dict[str, Any]]:
    loaded = load_inputs(InputSpec(records=path, kind=kind, **options))
    assert isinstance(loaded, LoadedInputs)
    assert loaded.source == path and loaded.judgments_source is None
    return [record.to_dict() for record in loaded.records]


def error_of(spec: InputSpec) -> InputError:
    with pytest.raises(InputError) as caught:
        load_inputs(spec)
    return caught.value


# --------------------------------------------------------------------------------------------
# ragas columns, old and new names
# --------------------------------------------------------------------------------------------


def test_old_ragas_names(tmp_path: Path) -> None:
    out = load(write_jsonl(tmp_path / "old.jsonl", OLD_ROWS))
    assert out == [
        {"id": "1", "query": "What is X?",
         "contexts": [{"id": "1", "text": "X is a thing."}, {"id": "2", "text": "Y too."}],
         "answer": "A thing.", "reference": "A thing", "source": "web"},
        {"id": "2", "query": "What is Z?", "answer": "Zed.", "reference": "zed"},
    ]


def test_old_ragas_ground_truths_list(tmp_path: Path) -> None:
    rows = [{"question": "q", "answer": "a", "ground_truths": ["one", "two"]}]
    assert load(write_jsonl(tmp_path / "r.jsonl", rows))[0]["reference"] == ["one", "two"]


def test_new_ragas_names_and_id_column(tmp_path: Path) -> None:
    out = load(write_jsonl(tmp_path / "new.jsonl", NEW_ROWS))
    assert [r["id"] for r in out] == ["7", "b"]  # an int id becomes a string
    assert out[0] == {"id": "7", "query": "What is X?",
                      "contexts": [{"id": "1", "text": "X is a thing."}],
                      "answer": "A thing.", "reference": "A thing", "reference_contexts": ["X."]}


def test_json_array_file(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(NEW_ROWS, indent=1), encoding="utf-8")
    assert load(str(path)) == load(write_jsonl(tmp_path / "rows.jsonl", NEW_ROWS))


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> str:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def test_csv_list_cells_as_json_and_python_literals(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "r.csv", ["user_input", "retrieved_contexts", "response",
                                          "reference", "note"], [
        ["q1", json.dumps(["c1", "c2"]), "a1", "r1", "x"],
        ["q2", "['c3', \"it's\"]", "a2", "['r2', 'r3']", ""],  # pandas' to_csv of lists
        ["q3", "[]", "a3", "[1] see note", "y"],
    ])
    out = load(path)
    assert out[0]["contexts"] == [{"id": "1", "text": "c1"}, {"id": "2", "text": "c2"}]
    assert out[1]["contexts"] == [{"id": "1", "text": "c3"}, {"id": "2", "text": "it's"}]
    assert out[1]["reference"] == ["r2", "r3"]
    assert "note" not in out[1]  # an empty cell is absent
    assert out[2]["reference"] == "[1] see note" and "contexts" not in out[2]
    assert out[0]["note"] == "x"


def test_csv_bad_list_cell_names_line_and_column(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "r.csv", ["question", "contexts"],
                     [["q1", "[]"], ["multi\nline", "[\"a\""]])
    error = error_of(InputSpec(records=path, kind="ragas"))
    assert (error.path, error.line, error.field) == (path, 3, "contexts")
    assert "malformed JSON" in error.message


def test_csv_unnamed_index_column_is_explained(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "r.csv", ["", "question"], [["0", "q"]])
    error = error_of(InputSpec(records=path, kind="ragas"))
    assert (error.line, "index=False" in error.message) == (1, True)


def test_parquet_list_columns(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pl.DataFrame(NEW_ROWS[1:]).write_parquet(path)
    out = load(str(path))
    assert out == [{"id": "b", "query": "What is Z?",
                    "contexts": [{"id": "1", "text": "Z."}, {"id": "2", "text": "Zed."}],
                    "answer": "Zed.", "reference": "zed", "reference_contexts": []}]


# --------------------------------------------------------------------------------------------
# Arrow: what datasets.save_to_disk writes
# --------------------------------------------------------------------------------------------


def save_to_disk(directory: Path, shards: list[list[dict[str, Any]]]) -> Path:
    """The layout datasets' save_to_disk writes: Arrow IPC stream shards named
    data-NNNNN-of-NNNNN.arrow, listed in state.json, features in dataset_info.json."""
    directory.mkdir(parents=True)
    names = [f"data-{i:05d}-of-{len(shards):05d}.arrow" for i in range(len(shards))]
    for name, rows in zip(names, shards, strict=True):
        pl.DataFrame(rows).write_ipc_stream(directory / name)
    state = {"_data_files": [{"filename": name} for name in names], "_fingerprint": "f00d",
             "_format_columns": None, "_format_kwargs": {}, "_format_type": None,
             "_output_all_columns": False, "_split": None}
    (directory / "state.json").write_text(json.dumps(state), encoding="utf-8")
    (directory / "dataset_info.json").write_text(json.dumps({"features": {}}), encoding="utf-8")
    return directory


def old_rows(start: int, count: int) -> list[dict[str, Any]]:
    return [{"question": f"q{i}", "contexts": [f"c{i}"], "answer": f"a{i}",
             "ground_truths": [f"g{i}"]} for i in range(start, start + count)]


def test_save_to_disk_directory_reads_shards_in_order(tmp_path: Path) -> None:
    directory = save_to_disk(tmp_path / "ds", [old_rows(0, 2), old_rows(2, 3)])
    out = load(str(directory))
    assert [(r["id"], r["query"]) for r in out] == [(str(i + 1), f"q{i}") for i in range(5)]
    assert out[4] == {"id": "5", "query": "q4", "contexts": [{"id": "1", "text": "c4"}],
                      "answer": "a4", "reference": "g4"}


def test_state_json_gives_the_order_not_the_names(tmp_path: Path) -> None:
    directory = save_to_disk(tmp_path / "ds", [old_rows(0, 1), old_rows(1, 1)])
    state = json.loads((directory / "state.json").read_text())
    state["_data_files"].reverse()
    (directory / "state.json").write_text(json.dumps(state))
    assert [r["query"] for r in load(str(directory))] == ["q1", "q0"]


def test_dataset_dict_splits(tmp_path: Path) -> None:
    root = tmp_path / "dd"
    save_to_disk(root / "train", [old_rows(0, 1)])
    save_to_disk(root / "test", [old_rows(5, 2)])
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    assert [r["query"] for r in load(str(root))] == ["q5", "q6"]  # split "test" by default
    assert [r["query"] for r in load(str(root), split="train")] == ["q0"]
    error = error_of(InputSpec(records=str(root), kind="ragas", split="dev"))
    assert error.field == "splits" and "'train', 'test'" in error.message


def test_single_arrow_files_stream_and_file_format(tmp_path: Path) -> None:
    frame = pl.DataFrame(old_rows(0, 2))
    frame.write_ipc_stream(tmp_path / "s.arrow")
    frame.write_ipc(tmp_path / "f.arrow")
    assert load(str(tmp_path / "s.arrow")) == load(str(tmp_path / "f.arrow"))
    assert len(load(str(tmp_path / "s.arrow"))) == 2


def test_arrow_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    error = error_of(InputSpec(records=str(tmp_path / "empty"), kind="ragas"))
    assert "data-*.arrow" in error.message
    (tmp_path / "bad.arrow").write_bytes(b"not arrow at all")
    error = error_of(InputSpec(records=str(tmp_path / "bad.arrow"), kind="ragas"))
    assert error.path == str(tmp_path / "bad.arrow") and "Arrow" in error.message


def test_arrow_bad_value_names_the_row(tmp_path: Path) -> None:
    rows = old_rows(0, 3)
    rows[2]["contexts"] = ["ok", "ok"]  # duplicate context text is fine; duplicate ids are not
    directory = save_to_disk(tmp_path / "ds", [rows[:2], [{**rows[2], "answer": None}]])
    assert "answer" not in load(str(directory))[2]  # null: absent
    frame = pl.DataFrame({"question": ["q"], "contexts": [[{"id": "d1", "text": 5}]]},
                         strict=False)
    frame.write_ipc_stream(tmp_path / "x.arrow")
    error = error_of(InputSpec(records=str(tmp_path / "x.arrow"), kind="ragas"))
    assert (error.line, error.field) == (1, "contexts[0].text")
    assert "(row 1)" in error.message


# --------------------------------------------------------------------------------------------
# Field maps and column errors
# --------------------------------------------------------------------------------------------


def test_field_map_overrides_the_defaults(tmp_path: Path) -> None:
    rows = [{"prompt": "q", "question": "not this one", "answer": "a", "qid": 3}]
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    out = load(path, field_map=(("query", "prompt"), ("id", "qid")))
    assert out == [{"id": "3", "query": "q", "answer": "a", "question": "not this one"}]


def test_errors_name_the_source_column(tmp_path: Path) -> None:
    rows = [NEW_ROWS[0], {**NEW_ROWS[1], "retrieved_contexts": ["ok", 5]}]
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    error = error_of(InputSpec(records=path, kind="ragas"))
    assert (error.path, error.line, error.field) == (path, 2, "retrieved_contexts[1]")
    rows = [{"user_input": 5, "response": "a"}]
    error = error_of(InputSpec(records=write_jsonl(tmp_path / "s.jsonl", rows), kind="ragas"))
    assert (error.line, error.field) == (1, "user_input")


def test_duplicate_ids_name_the_id_column(tmp_path: Path) -> None:
    rows = [{"qid": "a", "question": "q"}, {"qid": "a", "question": "q"}]
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    error = error_of(InputSpec(records=path, kind="ragas", field_map=(("id", "qid"),)))
    assert (error.line, error.field) == (2, "qid") and "duplicate record id" in error.message


def test_no_ragas_columns_names_found_expected_and_typos(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"questoin": "q", "respons": "a"}])
    error = error_of(InputSpec(records=path, kind="ragas"))
    assert error.path == path
    assert "['questoin', 'respons']" in error.message  # found
    assert "'user_input'" in error.message and "'retrieved_contexts'" in error.message
    assert "did you mean 'question', 'response'?" in error.message


def test_mapped_column_missing(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"question": "q"}])
    error = error_of(InputSpec(records=path, kind="ragas", field_map=(("query", "questio"),)))
    assert error.field == "questio" and "did you mean 'question'?" in error.message


def test_two_default_columns_are_ambiguous(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"question": "q", "user_input": "u"}])
    error = error_of(InputSpec(records=path, kind="ragas"))
    assert "--map query=COLUMN" in error.message
    out = load(path, field_map=(("query", "question"),))
    assert out[0]["query"] == "q" and out[0]["user_input"] == "u"


def test_a_leftover_column_named_like_a_mapped_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"response": "r", "answer": "a"}])
    error = error_of(InputSpec(records=path, kind="ragas", field_map=(("answer", "response"),)))
    assert error.field == "answer" and "'response'" in error.message


def test_empty_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_text("\n")
    assert error_of(InputSpec(records=str(tmp_path / "e.jsonl"), kind="ragas")).message == (
        "contains no records")
    error = error_of(InputSpec(records=str(tmp_path / "nope.jsonl"), kind="ragas"))
    assert error.message == "file not found"


def test_malformed_json_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"question": "q"}\n{"question": \n')
    assert error_of(InputSpec(records=str(path), kind="ragas")).line == 2


# --------------------------------------------------------------------------------------------
# The records kind
# --------------------------------------------------------------------------------------------

NATIVE = [{"id": "q1", "query": "Q?", "contexts": [{"id": "d1", "text": "t", "score": 1.5}],
           "answer": "A", "reference": ["r1", "r2"], "judgments": {"d1": 2}, "meta": {"k": 1}},
          {"id": "q2", "contexts": ["x", "y"], "judgments": {}}]


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet"])
def test_records_kind_without_a_map_is_load_records(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"r.{fmt}"
    if fmt in ("jsonl", "json"):
        write_jsonl(path, NATIVE)
    elif fmt == "csv":
        write_csv(path, ["id", "query", "contexts", "judgments"],
                  [["q1", "Q?", json.dumps(["a"]), json.dumps({"1": 1})], ["q2", "", "", ""]])
    else:
        pl.DataFrame([{"id": "q1", "query": "Q", "contexts": ["a", "b"]}]).write_parquet(path)
    loaded = load_inputs(InputSpec(records=str(path)))
    assert loaded.records == load_records(path)


def test_records_kind_with_a_map_renames_before_validation(tmp_path: Path) -> None:
    renamed = [{("question" if k == "query" else "qid" if k == "id" else k): v
                for k, v in row.items()} for row in NATIVE]
    path = write_jsonl(tmp_path / "r.jsonl", renamed)
    loaded = load_inputs(InputSpec(records=path, field_map=(("query", "question"),
                                                            ("id", "qid"))))
    assert loaded.records == load_records(write_jsonl(tmp_path / "n.jsonl", NATIVE))


def test_records_kind_map_on_csv_and_errors_name_columns(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "r.csv", ["qid", "question", "contexts"],
                     [["a", "Q", json.dumps(["x"])], ["b", "Q2", json.dumps([{"id": 1}])]])
    spec = InputSpec(records=path, field_map=(("id", "qid"), ("query", "question")))
    error = error_of(spec)
    assert (error.line, error.field) == (3, "contexts[0].text")
    path = write_csv(tmp_path / "s.csv", ["qid", "question"], [["a", "Q"]])
    out = load(path, kind="records", field_map=(("id", "qid"), ("query", "question")))
    assert out == [{"id": "a", "query": "Q"}]


def test_records_kind_missing_id_under_a_map(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"qid": "a"}, {"query": "no id"}])
    error = error_of(InputSpec(records=path, field_map=(("id", "qid"),)))
    assert (error.line, error.field) == (2, "qid")
    assert error.message == "missing required field 'qid'"


def test_records_kind_arrow(tmp_path: Path) -> None:
    directory = save_to_disk(tmp_path / "ds", [[{"id": "a", "query": "Q", "judgments": None,
                                                 "contexts": [{"id": "d", "text": "t"}]}]])
    assert load(str(directory), kind="records") == [
        {"id": "a", "query": "Q", "contexts": [{"id": "d", "text": "t"}]}]
