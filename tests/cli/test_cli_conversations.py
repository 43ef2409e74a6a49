"""Conversations through the command line, in-process: bad conversation input stops the run
with the conversation, turn and field named and nothing written; a good one writes the run's
three files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from rageval.cli import main

GOOD = {"id": "c", "turns": [{"query": "a?", "answer": "x y", "reference": "x y"},
                             {"query": "b?", "answer": "z", "reference": "z w"}]}


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *items: dict,
         extra: tuple[str, ...] = ()) -> tuple[int, str, Path]:
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    out = io.StringIO()
    target = tmp_path / "run"
    code = main(["score", str(path), "-m", "rouge1", "--out", str(target), "--no-progress",
                 "--bootstrap", "20", *extra], stdout=out)
    return code, out.getvalue() + capsys.readouterr().err, target


def test_bad_conversation_input_writes_nothing(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    for bad, words in (
            ({"id": "c", "turns": "hello"}, "field 'turns': conversation 'c': expected a list"),
            ({"id": "c", "turns": [{"answer": "x"}]},
             "field 'turns[0].query': conversation 'c', turn 1: missing required field"),
            ({"id": "c", "turns": [{"query": "q", "tool_calls": [{"arguments": {}}]}]},
             "field 'turns[0].tool_calls[0].name'"),
            ({"id": "c", "turns": [{"id": "t", "query": "q"}, {"id": "t", "query": "r"}]},
             "duplicate turn id 't' (turn 1 has it)")):
        code, printed, target = _run(tmp_path, capsys, GOOD | {"id": "ok"}, bad)
        assert code == 2, printed
        assert "line 2" in printed and words in printed
        assert not target.exists()


def test_a_run_of_conversations_writes_its_three_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, printed, target = _run(tmp_path, capsys, GOOD,
                                 extra=("--turn-threshold", "rouge1=0.9"))
    assert code == 0, printed
    assert "1 conversation of 2 turns" in printed
    assert sorted(p.name for p in target.iterdir()) == ["conversations.jsonl", "records.jsonl",
                                                      "summary.json"]
    [row] = [json.loads(x) for x in (target / "conversations.jsonl").read_text().splitlines()]
    assert row["scores"]["rouge1"]["first_failing"] == 2
