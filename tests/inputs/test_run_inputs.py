"""A run's inputs, built once (inputs/run.py): where the records come from, how they are read,
and the judgments that join them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trec_inputs import beir_dir, run_file

from rageval.core.errors import InputError, UsageError
from rageval.core.records import load_records
from rageval.inputs import InputSpec
from rageval.inputs.run import RunInputs
from rageval.inputs.source import InMemory, LoadedInput, RecordsFile, Traces

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"


def test_records_in_memory_are_one_window() -> None:
    records = load_records(DEMO)
    inputs = RunInputs(records)
    assert (inputs.source, inputs.manifest) == ("<memory>", None)
    assert [len(w) for w in inputs.windows()] == [len(records)]
    assert inputs.judgments.source() == "inline"


def test_a_records_file_is_read_lazily_window_by_window(tmp_path: Path) -> None:
    missing = RunInputs(tmp_path / "missing.jsonl", window=3)  # nothing read yet
    assert missing.source == str(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="not found"):
        next(missing.windows())
    sizes = [len(w) for w in RunInputs(DEMO, window=3).windows()]
    assert sizes == [3, 3, 2]


def test_a_spec_s_own_settings_win_and_it_says_how_to_read_it_again() -> None:
    spec = InputSpec(records=str(DEMO), max_line_bytes=1 << 20)
    inputs = RunInputs(spec, format="csv", max_line_bytes=10)
    assert isinstance(inputs.records, RecordsFile)
    assert (inputs.records.format, inputs.records.max_line_bytes) == ("csv", 1 << 20)
    assert inputs.manifest is not None and inputs.manifest["max_line_bytes"] == 1 << 20
    assert inputs.source == str(DEMO)


def test_qrels_join_each_window_as_it_is_read(tmp_path: Path) -> None:
    inputs = RunInputs(load_records(DEMO), qrels={"q1": {"x": 1}})
    with pytest.raises(InputError, match="inline judgments"):
        list(inputs.windows())  # the demo's q1 is judged inline already


def test_a_beir_directory_s_qrels_join_where_every_other_judgment_does(tmp_path: Path) -> None:
    spec = InputSpec(run=run_file(tmp_path), beir=str(beir_dir(tmp_path / "beir")))
    inputs = RunInputs(spec)
    (window,) = inputs.windows()
    assert {r.id: r.judgments for r in window} == {"q2": None, "q1": {"d1": 1, "d7": 2}}
    assert inputs.judgments.source() == "qrels"
    both = RunInputs(spec, qrels={"q1": {"d1": 1}})
    with pytest.raises(UsageError, match="a BEIR directory gives the qrels"):
        both.windows()


def test_the_source_is_decided_once_when_the_inputs_are_built(tmp_path: Path) -> None:
    run = run_file(tmp_path)
    cases = [(load_records(DEMO), InMemory, "<memory>", True),
             (DEMO, RecordsFile, str(DEMO), True),
             (InputSpec(records=str(DEMO)), RecordsFile, str(DEMO), True),
             (InputSpec(records=str(DEMO), kind="ragas"), LoadedInput, str(DEMO), True),
             (InputSpec(run=run), LoadedInput, run, True),
             (InputSpec(records=str(DEMO), kind="openinference"), Traces, str(DEMO), False),
             (InputSpec(phoenix="http://127.0.0.1:1", project="p"), Traces,
              "phoenix project 'p' at http://127.0.0.1:1", False)]
    for given, kind, name, rereadable in cases:
        source = RunInputs(given).records
        assert (type(source), source.name, source.rereadable()) == (kind, name, rereadable)


def test_a_pipe_is_read_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    assert not RunInputs(tmp_path / "pipe").records.rereadable()


def test_a_spec_that_does_not_hold_together_is_refused_before_anything_is_read() -> None:
    with pytest.raises(UsageError, match="give a records file or a run, not both"):
        RunInputs(InputSpec(records=str(DEMO), run="r.trec"))


def test_a_beir_directory_read_again_keeps_its_qrels_joined_once(tmp_path: Path) -> None:
    spec = InputSpec(run=run_file(tmp_path), beir=str(beir_dir(tmp_path / "beir")))
    inputs = RunInputs(spec)
    (first,) = inputs.windows()
    (again,) = inputs.windows(again=True)  # as a pass over the run reads it
    assert [r.judgments for r in again] == [r.judgments for r in first]
    assert inputs.judgments.source() == "qrels"
