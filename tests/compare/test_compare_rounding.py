"""Every mean a correctly rounded sum: the comparison held in memory, the one streamed from
disk and the runs' own summaries (held whole, or kept as running sums) give the same values,
deltas and counts to the last bit, on runs of a few thousand records and of conversations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_compare import _write

from rageval.api import evaluate
from rageval.compare.runs.compare import compare_runs
from rageval.core.errors import InputError
from rageval.core.records import records_from_dicts
from rageval.core.results import Results

METRICS = ["tools:f1", "tools:precision", "rouge1", "bleu"]
FIELDS = ("baseline_value", "system_value", "delta", "wins", "ties", "losses", "n",
          "n_dropped", "aggregate")
TURN_FIELDS = ("turn", "n", "baseline_value", "system_value", "delta")
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "home"]


def _calls(rng: np.random.Generator, count: int) -> list[dict[str, Any]]:
    return [{"name": str(rng.choice(["search", "calc", "fetch"])),
             "arguments": {"q": int(rng.integers(0, 3))}} for _ in range(count)]


def _record(rng: np.random.Generator, key: str, seed: int) -> dict[str, Any]:
    truth = np.random.default_rng(seed)  # the same reference in both runs
    record = {"id": key, "query": f"q {key}", "answer": " ".join(rng.choice(WORDS, 6)),
              "reference": " ".join(truth.choice(WORDS, 6)),
              "tool_calls": _calls(rng, int(rng.integers(1, 6)))}
    if truth.random() > 0.1:  # the rest have no expected calls: tools metrics unscored
        record["reference_tool_calls"] = _calls(truth, int(truth.integers(1, 6)))
    return record


def _records(seed: int, count: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [_record(rng, f"r{i}", i) for i in range(count)]


def _conversations(seed: int, count: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"id": f"c{c}", "turns": [_record(rng, f"t{t}", 1000 * c + t)
                                      for t in range(1 + c % 4)]} for c in range(count)]


def _run(path: Path, items: list[dict[str, Any]], ci: str = "records") -> Path:
    evaluate(records_from_dicts(items), METRICS, bootstrap=20, ci=ci, out=path)
    return path


@pytest.fixture(scope="module")
def record_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("records")
    return _run(root / "a", _records(1, 3000)), _run(root / "b", _records(2, 3000))


@pytest.fixture(scope="module")
def conversation_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("conversations")
    return _run(root / "a", _conversations(1, 400)), _run(root / "b", _conversations(2, 400))


def _both(runs: tuple[Path, Path]) -> tuple[Any, Any]:
    draws = {"resamples": 100, "permutations": 100, "seed": 3}
    return compare_runs(list(runs), **draws), compare_runs(list(runs), ci="poisson", **draws)


def _assert_identical(exact: Any, streamed: Any) -> None:
    assert exact.n_records == streamed.n_records and exact.dropped == streamed.dropped
    assert [r["metric"] for r in exact.rows] == [r["metric"] for r in streamed.rows]
    for ours, theirs in zip(exact.rows, streamed.rows, strict=True):
        for key in FIELDS:
            assert ours[key] == theirs[key], (ours["metric"], key, ours[key], theirs[key])
    assert len(exact.per_turn) == len(streamed.per_turn)
    for ours, theirs in zip(exact.per_turn, streamed.per_turn, strict=True):
        for key in TURN_FIELDS:
            assert ours[key] == theirs[key], (ours["metric"], ours["turn"], key)


def test_tools_f1_means_are_correctly_rounded(tmp_path: Path) -> None:
    # Added one by one, 0 + 0.2 + 0.4 is 0.6000000000000001: its third is not 0.2.
    left = _write(tmp_path / "left", ["x", "y", "z"], {"tools:f1": [0.0, 0.2, 0.4]})
    right = _write(tmp_path / "right", ["x", "y", "z"], {"tools:f1": [1.0, 1.0, 1.0]})
    for ci in ("records", "poisson"):
        row = compare_runs([left, right], resamples=50, permutations=50, ci=ci).rows[0]
        assert (row["baseline_value"], row["system_value"], row["delta"]) == (0.2, 1.0, 0.8), ci


def test_exact_and_streamed_comparisons_agree_to_the_last_bit(
        record_runs: tuple[Path, Path]) -> None:
    exact, streamed = _both(record_runs)
    assert {r["metric"] for r in exact.rows} >= set(METRICS)
    assert any(r["n_dropped"] for r in exact.rows)  # unscored records are left out alike
    _assert_identical(exact, streamed)


def test_exact_and_streamed_comparisons_of_conversations_agree_to_the_last_bit(
        conversation_runs: tuple[Path, Path]) -> None:
    exact, streamed = _both(conversation_runs)
    assert exact.per_turn and exact.settings.get("unit")
    _assert_identical(exact, streamed)


@pytest.mark.parametrize("runs", ["record_runs", "conversation_runs"])
def test_the_runs_summary_means_are_the_comparisons_values(
        runs: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    a, b = request.getfixturevalue(runs)
    exact = compare_runs([a, b], resamples=100, permutations=100, seed=3)
    summaries = (Results.load(a).summary, Results.load(b).summary)
    for row in exact.rows:
        if row["aggregate"] != "mean" or row["n_dropped"]:
            continue  # records left out of the pairing: the comparison's value is its own
        assert row["baseline_value"] == summaries[0][row["metric"]].value, row["metric"]
        assert row["system_value"] == summaries[1][row["metric"]].value, row["metric"]
    # The summary kept as running sums (a run past the records kept whole) says the same.
    items = _records(1, 3000) if runs == "record_runs" else _conversations(1, 400)
    online = Results.load(_run(tmp_path / "online", items, ci="poisson")).summary
    for name, summary in summaries[0].items():
        assert online[name].value == summary.value, name


def _message(runs: list[Path], ci: str, intersect: bool = False) -> str:
    with pytest.raises(InputError) as caught:
        compare_runs(runs, resamples=10, permutations=10, intersect=intersect, ci=ci)
    return str(caught.value)


def test_both_ways_pair_by_one_set_of_rules_and_messages(tmp_path: Path) -> None:
    # One pairing: runs held in memory and runs streamed refuse alike, naming the same ids.
    ids = [f"q{i}" for i in range(12)]
    a = _write(tmp_path / "a", ids[:10], {"m": [0.5] * 10})
    b = _write(tmp_path / "b", ids[3:], {"m": [0.5] * 9})
    repeated = _write(tmp_path / "r", ["q9", "q9", "q1", "q1", "q0"], {"m": [0.5] * 5})
    lonely = _write(tmp_path / "l", ["x", "y"], {"m": [0.5] * 2})
    for runs, intersect in (([a, b], False), ([repeated, a], False), ([a, lonely], True)):
        held, streamed = (_message(runs, ci, intersect) for ci in ("records", "poisson"))
        assert held == streamed
    assert "b lacks 3 ids ('q0', 'q1', 'q2') (in" in _message([a, b], "records").replace(
        str(tmp_path / ""), "")
    assert "repeated: 2 ids ('q1', 'q9')" in _message([repeated, a], "records")
