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
from rageval.core.labels import (
    LabelLine,
    LabelsFile,
    active_pool,
    current_labels,
    read_labels,
)

TIME = "2026-11-29T08:00:00Z"


def line(record: str, label: float | None, annotator: str = "ana", **extra) -> LabelLine:
    return LabelLine(record, "judge:faithfulness", label, annotator, TIME, **extra)


texts = st.text(min_size=1, max_size=20)
uniform_lines = st.builds(
    LabelLine, id=texts, metric=texts,
    label=st.one_of(st.integers(1, 5).map(float), st.floats(-1e6, 1e6, allow_nan=False)),
    annotator=texts, time=st.just(TIME), shown_judge=st.booleans())
active_lines = st.builds(
    LabelLine, id=texts, metric=texts, label=st.integers(1, 5).map(float), annotator=texts,
    time=st.just(TIME), selection=st.just("active"), probability=st.floats(0.001, 1.0),
    seed=st.integers(-(2**40), 2**40), position=st.integers(0, 10**6))
lines = st.one_of(uniform_lines, active_lines)


@settings(max_examples=60, deadline=None)
@given(st.lists(lines, max_size=8))
def test_what_is_appended_reads_back_unchanged(tmp_path_factory, written: list[LabelLine]):
    path = tmp_path_factory.mktemp("labels") / "labels.jsonl"
    labels = LabelsFile(path)
    for item in written:
        labels.append(item)
    back = read_labels(path)
    assert [(b.id, b.metric, b.label, b.annotator, b.shown_judge, b.selection, b.probability,
             b.seed, b.position) for b in back] == [
        (w.id, w.metric, w.label, w.annotator, w.shown_judge, w.selection, w.probability,
         w.seed, w.position) for w in written]
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
     '"selection": "active", "seed": 0, "position": 1}', "probability", "finite number"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"selection": "active", "probability": 0, "seed": 0, "position": 1}', "probability",
     "(0, 1]"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"selection": "active", "probability": 0.5, "position": 1}', "seed", "an integer"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"selection": "active", "probability": 0.5, "seed": 0, "position": -1}', "position",
     "an integer of at least 0"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"selection": "active", "probability": 0.5, "seed": 0.5, "position": 1}', "seed",
     "an integer"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", '
     '"passed": true}', "label", "passed line carries no label"),
    ('{"id": "q1", "metric": "m", "label": null, "annotator": "a", "time": "t", '
     '"undo": true, "passed": true}', "undo", "not passed and undo"),
    ('{"id": "q1", "metric": "m", "label": null, "annotator": "a", "time": "t", '
     '"drawn": true}', "drawn", "only an active walk draws"),
    ('{"id": "q1", "metric": "m", "label": 2, "annotator": "a", "time": "t", '
     '"drawn": true, "selection": "active", "probability": 0.5, "seed": 0, "position": 1}',
     "label", "a drawn line carries no label"),
    ("[" * 100_000, None, "not a JSON object"),
    ('{"id": "q1", "metric": "m", "label": 3, "annotator": "a", "time": "t", "budget": 0}',
     "budget", "must be positive"),

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


def test_a_line_that_is_not_utf8_is_refused_naming_it(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(line("q1", 4).encode() + b'{"id": "q\xff", "metric": "m"}\n')
    with pytest.raises(InputError, match="line 2: not a JSON object"):
        read_labels(path)


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path):
    with pytest.raises(InputError, match="cannot read the labels file"):
        read_labels(tmp_path / "none.jsonl")


def test_undo_takes_back_that_annotators_label_and_a_relabel_stands(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    labels = LabelsFile(path)
    for item in (line("q1", 4), line("q1", 2, "bo"), line("q1", None, undo=True),
                 line("q2", 3), line("q1", 5),
                 line("q3", None, selection="active", probability=0.25, passed=True, seed=0,
                      position=0),
                 line("q3", None, "bo", selection="active", probability=0.25, passed=True,
                      seed=0, position=0)):
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
    assert [x.id for x in read_labels(path)] == ["q1"]  # never acknowledged: skipped
    other = LabelsFile(path)  # reads the whole line, leaves the torn one alone
    assert [x.id for x in other.lines] == ["q1"]
    written, fresh = other.append(line("q3", 2))
    assert written is not None and written.line == 2 and fresh == []
    assert [x.id for x in read_labels(path)] == ["q1", "q3"]


def test_a_last_line_that_is_json_but_wrong_is_an_error_never_dropped(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    bad = b'{"id": "q2", "metric": "m", "label": "four", "annotator": "a", "time": "t"}'
    path.write_bytes(line("q1", 4).encode() + bad)
    with pytest.raises(InputError, match="line 2, field 'label'"):
        read_labels(path)
    labels = LabelsFile(path)  # the bad last line has no newline: not read yet
    with pytest.raises(InputError, match="line 2, field 'label'"):
        labels.append(line("q3", 5))
    assert path.read_bytes().endswith(bad + b"\n")  # ended, never cut; nothing appended


def test_a_last_line_written_by_hand_without_its_newline_is_kept(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(line("q1", 4).encode() + line("q2", 3).encode().rstrip(b"\n"))
    assert [x.id for x in read_labels(path)] == ["q1", "q2"]
    labels = LabelsFile(path)
    written, _ = labels.append(line("q3", 5))
    assert written is not None and written.line == 3
    assert [(x.id, x.line) for x in read_labels(path)] == [("q1", 1), ("q2", 2), ("q3", 3)]
    assert [x.id for x in labels.lines] == ["q1", "q2", "q3"]


@pytest.mark.parametrize("change", ["replace", "remove", "cut", "rewrite in place"])
def test_a_file_replaced_or_rewritten_under_a_writer_is_an_error(tmp_path: Path, change: str):
    path = tmp_path / "labels.jsonl"
    labels = LabelsFile(path)
    labels.append(line("q1", 4))
    labels.append(line("q2", 3))
    before = path.read_bytes()
    if change == "replace":
        (tmp_path / "new.jsonl").write_bytes(before)
        (tmp_path / "new.jsonl").replace(path)
    elif change == "remove":
        path.unlink()
    elif change == "cut":
        path.write_bytes(before[:10])
    else:  # another file copied over this one: the same inode, as long, other lines
        with open(path, "r+b") as handle:
            handle.write(line("q9", 1).encode() + line("q8", 2).encode())
    words = "removed while in use" if change == "remove" else "replaced or rewritten"
    with pytest.raises(InputError, match=words):
        labels.append(line("q3", 5))
    assert not path.exists() if change == "remove" else b"q3" not in path.read_bytes()


def test_several_lines_are_appended_in_one_write(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    labels = LabelsFile(path)
    written, _ = labels.append_all([line("q1", 4), line("q2", 3)])
    assert [(x.id, x.line) for x in written or []] == [("q1", 1), ("q2", 2)]
    refused, _ = labels.append_all([line("q3", 4)], unless=lambda seen: "no")
    assert refused is None and len(read_labels(path)) == 2


def walked(record: str, position: int, label: float | None = None, annotator: str = "ana",
           **extra) -> LabelLine:
    return line(record, label, annotator, selection="active", seed=extra.pop("seed", 7),
                position=position, probability=extra.pop("probability", 0.5), **extra)


def test_the_active_pool_is_the_walk_up_to_its_first_record_without_an_outcome(tmp_path):
    given = [walked("a", 0, passed=True), walked("b", 1, 4), walked("c", 2, passed=True),
             walked("d", 3, 2), walked("d", 3, None, undo=True),  # undone: a gap at 3
             walked("e", 4, passed=True), walked("f", 5, 5), walked("f", 5, 4, "bo")]
    lines = [LabelLine(**{**x.__dict__, "line": i + 1}) for i, x in enumerate(given)]
    pool = active_pool(lines, "labels.jsonl")
    assert (pool.seed, pool.cut, pool.blocking, pool.waiting) == (7, 3, "d", 2)
    assert pool.chances == {"a": 0.5, "b": 0.5, "c": 0.5}
    relabelled = [*lines, LabelLine(**{**walked("d", 3, 3).__dict__, "line": 9})]
    pool = active_pool(relabelled, "labels.jsonl")
    assert (pool.cut, pool.blocking, pool.waiting) == (6, None, 0)
    assert set(pool.chances) == {"a", "b", "c", "d", "e", "f"}
    skipped = [x for x in lines if x.id != "b"]  # b skipped before any line of it
    assert active_pool(skipped, "labels.jsonl").cut == 1


@pytest.mark.parametrize(("second", "field"), [
    (walked("a", 0, passed=True, seed=8), "seed"),
    (walked("b", 3, 4), "position"),
    (walked("b", 1, 4, "bo", probability=0.25), "probability"),
    (walked("x", 1, 4), "position"),
    (walked("a", 0, 4), "label"),
])
def test_an_active_walk_that_contradicts_itself_is_refused(second: LabelLine, field: str):
    first = [walked("a", 0, passed=True), walked("b", 1, 4)]
    lines = [LabelLine(**{**x.__dict__, "line": i + 1}) for i, x in enumerate([*first, second])]
    with pytest.raises(InputError) as caught:
        active_pool(lines, "labels.jsonl")
    assert "labels.jsonl, line 3" in str(caught.value)
    assert f"field '{field}'" in str(caught.value)


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
