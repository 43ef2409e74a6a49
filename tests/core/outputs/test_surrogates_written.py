"""Results a caller builds by hand are written by the same lone-surrogate rule as a scored
run: U+FFFD in the text, the record's details saying which fields were repaired."""

from __future__ import annotations

import json
from pathlib import Path

from rageval.core.outputs.surrogates import LONE_SURROGATES, utf8_record_lines
from rageval.core.results import MetricSummary, RecordResult, Results


def test_hand_built_results_with_a_lone_surrogate_are_written_repaired(tmp_path: Path) -> None:
    rows = [RecordResult("a", {"m": 1.0}, {}, {"m": {"reasoning": "fine"}}),
            RecordResult("b", {"m": None}, {"m": "server said \ud800"},
                         {"m": {"reasoning": "ok \udfff"}})]
    results = Results(rows, {"m": MetricSummary(1.0, 1, 1, None, "m")}, {})
    results.write(tmp_path / "run")
    lines = [json.loads(line) for line in
             (tmp_path / "run" / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines[0]["details"] == {"m": {"reasoning": "fine"}}  # untouched
    assert lines[1]["errors"] == {"m": "server said \ufffd"}
    assert lines[1]["details"]["m"] == {"reasoning": "ok \ufffd"}
    assert lines[1]["details"][LONE_SURROGATES] == ["errors.m", "details.m.reasoning"]
    assert Results.load(tmp_path / "run").records[1].errors == {"m": "server said \ufffd"}


def test_lines_without_a_surrogate_are_plain_json_lines() -> None:
    rows = [{"id": "x", "scores": {"m": 0.5}, "details": {}, "errors": {}}]
    assert utf8_record_lines(rows) == (json.dumps(rows[0]) + "\n").encode("utf-8")
