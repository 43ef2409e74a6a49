"""The human labels file: what it reads, what it refuses (naming file, line and field), what
stands after undos, and appending from several processes at once."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.errors import InputError
from rageval.core.labels import LabelLine, LabelsFile, current_labels, read_labels

TIME = "2026-11-29T08:00:00Z"


def line(record: str, label: float | None, annotator: str = "ana", **extra) -> LabelLine:
    return LabelLine(record, "judge:faithfulness", label, annotator, TIME, **extra)


texts = st.text(min_size=1, max_size=20)
lines = st.builds(
    LabelLine, id=texts, metric=texts,
    label=st.one_of(st.integers(1, 5).map(float), st.floats(-1e6, 1e6, allow_nan=False)),
    annotator=texts, time=st.just(TIME), shown_judge=st.booleans(),
    selection=st.sampled_from(["uniform", "active"]),
    probability=st.floats(0.001, 1.0))


@settings(max_examples=60, deadline=None)
@given(st.lists(lines, max_size=8))
def test_what_is_appended_reads_back_unchanged(tmp_path_factory, written: list[LabelLine]):
    path = tmp_path_factory.mktemp("labels") / "labels.jsonl"
    labels = LabelsFile(path)
    for item in written:
        labels.append(item)
    back = read_labels(path)
    assert [(b.id, b.metric, b.label, b.annotator, b.shown_judge, b.selection, b.probability)
            for b in back] == [(w.id, w.metric, w.label, w.annotator, w.shown_judge,
                                w.selection, w.probability) for w in written]
    assert [b.line for b in back] == list(range(1, len(written) + 1))


def test_an_integer_label_is_written_as_the_key_pressed(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    LabelsFile(path).append(line("q1", 4.0))
    assert json.loads(path.read_text())["label"] == 4
    assert '"label": 4,' in path.read_text()


@pytest.mark.parametrize(("text", "field", "words"), [
    ('[1, 2]', None, "not a JSON object"),
    ('{"id": "q1"', None, "not a JSON object"),
    ('{"metric": "m", "label": 3, "annotator": "a", "time": "t"}', "id", "non-empty string"),
    ('{"id": "q1", "metric": "m", "label": true, "annotator": "a", "time": "t"}', "label",
     "finite number"),
    ('{"id": "q1", "metric": "m", "label": "4", "annotator": "a", "time": "t"}', "label",
     "finite number"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"selection": "greedy"}', "selection", "uniform, active"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"selection": "active"}', "probability", "finite number"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"selection": "active", "probability": 0}', "probability", "(0, 1]"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"passed": true}', "label", "passed line carries no label"),
    ('{"id": "q1", "metric": "m", "label": null, "annotator": "a", "time": "t", '
     '"undo": true, "passed": true}', "undo", "not both"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"shown_judge": "yes"}', "shown_judge", "true or false"),
])
def test_a_bad_line_is_refused_naming_file_line_and_field(tmp_path: Path, text: str,
                                                          field: str | None, words: str):
    path = tmp_path / "labels.jsonl"
    good = json.dumps(line("q0", 3).to_json())
    path.write_text(f"{good}\n\n{text}\n")
    with pytest.raises(InputError) as caught:
        read_labels(path)
    message = str(caught.value)
    assert str(path) in message and "line 3" in message and words in message
    if field is not None:
        assert f"field '{field}'" in message


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path):
    with pytest.raises(InputError, match="cannot read the labels file"):
        read_labels(tmp_path / "none.jsonl")


def test_undo_takes_back_that_annotators_label_and_a_relabel_stands(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    labels = LabelsFile(path)
    for item in (line("q1", 4), line("q1", 2, "bo"), line("q1", None, undo=True),
                 line("q2", 3), line("q1", 5),
                 line("q3", None, selection="active", probability=0.25, passed=True),
                 line("q3", None, "bo", selection="active", probability=0.25, passed=True)):
        labels.append(item)
    standing, passed = current_labels(read_labels(path))
    assert [(x.id, x.annotator, x.label) for x in standing] == [
        ("q1", "bo", 2.0), ("q2", "ana", 3.0), ("q1", "ana", 5.0)]
    assert [(x.id, x.line) for x in passed] == [("q3", 6)]


def test_a_line_cut_short_by_a_killed_writer_is_cut_before_the_next_append(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    labels = LabelsFile(path)
    labels.append(line("q1", 4))
    with open(path, "ab") as handle:
        handle.write(b'{"id": "q2", "metric": "judge:faith')
    other = LabelsFile(path)  # reads the whole line, leaves the torn one alone
    assert [x.id for x in other.lines] == ["q1"]
    written, fresh = other.append(line("q3", 2))
    assert written is not None and written.line == 2 and fresh == []
    assert [x.id for x in read_labels(path)] == ["q1", "q3"]


def test_append_refuses_what_the_check_under_the_lock_refuses(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    first, second = LabelsFile(path), LabelsFile(path)
    first.append(line("q1", 4))

    def labelled_already(seen: list[LabelLine]) -> str | None:
        return "labelled" if any(x.id == "q1" and x.annotator == "ana" for x in seen) else None

    written, fresh = second.append(line("q1", 5), unless=labelled_already)
    assert written is None and [x.id for x in fresh] == ["q1"]
    assert len(read_labels(path)) == 1


def _label_all(path: str, annotator: str, records: int) -> int:
    labels = LabelsFile(path)
    done = 0
    for i in range(records):
        def mine(seen: list[LabelLine], record: str = f"q{i}") -> bool:
            return any(x.id == record and x.annotator == annotator for x in seen)
        for _ in range(2):  # a second try of each must be refused
            written, _ = labels.append(line(f"q{i}", i % 5 + 1, annotator), unless=mine)
            done += written is not None
    return done


def test_two_processes_appending_at_once_lose_nothing_and_never_label_twice(tmp_path: Path):
    path = str(tmp_path / "labels.jsonl")
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        counts = pool.starmap(_label_all, [(path, "ana", 150), (path, "bo", 150)])
    assert counts == [150, 150]
    back = read_labels(path)
    assert len(back) == 300
    for annotator in ("ana", "bo"):
        assert sorted(x.id for x in back if x.annotator == annotator) == sorted(
            f"q{i}" for i in range(150))
