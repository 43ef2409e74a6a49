"""rageval compare on runs of conversations: turns paired by conversation and position, values
and intervals over conversations (resampled whole), and the differences turn by turn."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rageval.api import evaluate
from rageval.compare.runs.compare import compare_runs
from rageval.core.records import records_from_dicts
from rageval.stats.resampling import paired_bootstrap_ci

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "ran", "to", "the", "park"]


def _conversations(seed: int, own_ids: bool = False) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for c in range(7):
        turns = []
        for t in range(1 + c % 3):  # the same conversations in both runs
            turn = {"query": f"q{c}-{t}", "answer": " ".join(rng.choice(WORDS, 5)),
                    "reference": " ".join(np.random.default_rng(c * 10 + t).choice(WORDS, 5))}
            if own_ids:
                turn["id"] = f"step-{t}"
            turns.append(turn)
        out.append({"id": f"c{c}", "turns": turns})
    out.append({"id": "alone", "query": "q", "answer": "the cat", "reference": "the cat sat"})
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    base, system = root / "base", root / "system"
    evaluate(records_from_dicts(_conversations(1)), ["rouge1", "bleu"], bootstrap=50, out=base)
    # The system's turns carry ids of their own: they still pair by position.
    evaluate(records_from_dicts(_conversations(2, own_ids=True)), ["rouge1", "bleu"],
             bootstrap=50, out=system)
    return base, system


def _per_conversation(run: Path, name: str) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for line in (run / "records.jsonl").read_text().splitlines():
        row = json.loads(line)
        by.setdefault(row.get("conversation") or row["id"], []).append(row["scores"][name])
    return {key: sum(v) / len(v) for key, v in by.items()}


def test_values_deltas_and_intervals_are_over_conversations(runs: tuple[Path, Path]) -> None:
    base, system = runs
    comparison = compare_runs([base, system], resamples=2000, permutations=2000, seed=4)
    row = next(r for r in comparison.rows if r["metric"] == "rouge1")
    b, s = _per_conversation(base, "rouge1"), _per_conversation(system, "rouge1")
    assert row["n"] == len(b) == 8  # seven conversations and the record on its own
    assert row["baseline_value"] == pytest.approx(np.mean(list(b.values())))
    summary = json.loads((base / "summary.json").read_text())["metrics"]["rouge1"]
    assert row["baseline_value"] == pytest.approx(summary["value"])
    differences = np.array([s[k] - b[k] for k in b])
    assert row["delta"] == pytest.approx(differences.mean())
    assert row["ci95"] == pytest.approx(list(paired_bootstrap_ci(differences, resamples=2000,
                                                                 seed=4)))
    assert row["wins"] + row["ties"] + row["losses"] == 8
    assert row["p_method"] == "exact"  # 2**8 relabellings of conversations, all enumerated
    assert "conversation" in comparison.settings["unit"]
    bleu = next(r for r in comparison.rows if r["metric"] == "bleu")
    assert bleu["aggregate"] == "corpus" and bleu["n"] == 8


def test_turn_by_turn_differences(runs: tuple[Path, Path]) -> None:
    base, system = runs
    comparison = compare_runs([base, system], resamples=500, permutations=500, seed=0)
    rows = [r for r in comparison.per_turn if r["metric"] == "rouge1"]
    turns: dict[int, list[tuple[float, float]]] = {}
    lines = {name: [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
             for name, run in (("b", base), ("s", system))}
    system_by_key = {(x.get("conversation"), x.get("turn")): x for x in lines["s"]}
    for x in lines["b"]:
        if x.get("turn"):
            other = system_by_key[(x["conversation"], x["turn"])]
            turns.setdefault(x["turn"], []).append((x["scores"]["rouge1"],
                                                    other["scores"]["rouge1"]))
    assert [r["turn"] for r in rows] == sorted(turns)
    for row in rows:
        pairs = turns[row["turn"]]
        assert row["n"] == len(pairs)
        assert row["delta"] == pytest.approx(np.mean([s - b for b, s in pairs]))
        assert not math.isnan(row["ci95"][0])
    assert all(r["metric"] != "bleu" for r in comparison.per_turn)  # a corpus figure


def test_turns_records_and_conversations_never_pair_with_each_other(tmp_path: Path) -> None:
    items = [{"id": "b#1", "query": "q", "answer": "a b", "reference": "a b"},
             {"id": "b", "turns": [{"id": "z", "query": "q", "answer": "a", "reference": "a"}]}]
    runs = []
    for name in ("one", "two"):
        evaluate(records_from_dicts(items), ["rouge1"], bootstrap=10, out=tmp_path / name)
        runs.append(tmp_path / name)
    comparison = compare_runs(runs, resamples=100, permutations=100)
    assert comparison.n_records == 2  # the record "b#1" and the first turn of "b"
    assert comparison.rows[0]["delta"] == 0.0
