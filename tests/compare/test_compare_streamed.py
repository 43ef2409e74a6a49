"""Comparisons streamed from disk (``--ci poisson``, and runs past the records kept whole): the
same values, deltas and counts as the exact comparison, intervals and p-values computed by hand
from each unit's Poisson weights and sign flips, whatever the partitioning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_compare import ANSWERS_A, ANSWERS_B, _lexical_run, _write
from test_compare_conversations import _conversations

from rageval.api import evaluate
from rageval.compare.runs import compare as compare_module
from rageval.compare.runs import spill
from rageval.compare.runs import streamed as streamed_module
from rageval.compare.runs.compare import compare_runs
from rageval.compare.runs.corpus import corpus_resampler
from rageval.compare.runs.pairing import load_runs
from rageval.core.errors import InputError, UsageError
from rageval.core.records import records_from_dicts
from rageval.stats.poisson import poisson_weights, seeded_keys, sign_flips, unit_keys
from rageval.stats.resampling import percentile_interval

SEED, DRAWS = 7, 400


def _rows(comparison: Any) -> dict[str, dict[str, Any]]:
    return {r["metric"]: r for r in comparison.rows}


def _weights(units: list[str]) -> tuple[np.ndarray, np.ndarray]:
    seeded = seeded_keys(unit_keys(units), SEED)
    return poisson_weights(seeded, DRAWS), sign_flips(seeded, DRAWS)


def _p(observed: float, relabelled: np.ndarray) -> float:
    extreme = np.abs(relabelled) >= abs(observed) * (1 - 1e-9)
    return (int(extreme.sum()) + 1) / (DRAWS + 1)


@pytest.fixture(scope="module")
def mean_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    root = tmp_path_factory.mktemp("means")
    rng = np.random.default_rng(3)
    ids = [f"q{i}" for i in range(150)]
    base = rng.random(150)
    system = np.clip(base + 0.05 + rng.normal(0, 0.1, 150), 0, 1)
    system[::17] = np.nan  # unscored in the system only: left out of that metric
    columns_a = {"m": base.tolist(), "k": rng.integers(1, 6, 150).astype(float).tolist()}
    columns_b = {"m": [None if np.isnan(v) else float(v) for v in system],
                 "k": rng.integers(1, 6, 150).astype(float).tolist()}
    return (_write(root / "a", ids, columns_a), _write(root / "b", ids[::-1],
                                                       {k: v[::-1] for k, v in columns_b.items()}),
            ids)


def test_mean_rows_equal_the_exact_comparison_and_the_hand_computation(
        mean_runs: tuple[Path, Path, list[str]]) -> None:
    a, b, ids = mean_runs
    exact = _rows(compare_runs([a, b], resamples=DRAWS, permutations=DRAWS, seed=SEED))
    streamed = compare_runs([a, b], resamples=DRAWS, permutations=DRAWS, seed=SEED, ci="poisson")
    assert streamed.settings["method"] == "poisson" and streamed.n_records == 150
    weights, flips = _weights(["\0" + i for i in ids])
    records = {name: {r["id"]: r["scores"] for r in map(json.loads, (run / "records.jsonl")
                                                          .read_text().splitlines())}
               for name, run in (("a", a), ("b", b))}
    for name, row in _rows(streamed).items():
        for key in ("baseline_value", "system_value", "delta"):
            assert row[key] == pytest.approx(exact[name][key], rel=1e-12)
        for key in ("wins", "ties", "losses", "n", "n_dropped", "headline", "aggregate"):
            assert row[key] == exact[name][key]
        pairs = np.array([[records["a"][i][name], records["b"][i][name]] for i in ids],
                         dtype=float)
        kept = ~np.isnan(pairs).any(axis=1)
        d = np.where(kept, pairs[:, 1] - pairs[:, 0], 0.0)
        ratios = (weights.T @ d) / (weights.T @ kept)
        assert row["ci95"] == pytest.approx(list(percentile_interval(ratios)), rel=1e-12)
        assert row["p_value"] == pytest.approx(_p(d.sum(), flips.T @ d), rel=1e-12)
        assert row["p_method"] == "monte-carlo"
    assert _rows(streamed)["m"]["n"] == 150 - len(range(0, 150, 17))


def test_partitions_and_record_order_do_not_change_the_figures(
        mean_runs: tuple[Path, Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, _ = mean_runs
    whole = compare_runs([a, b], resamples=DRAWS, permutations=DRAWS, seed=SEED, ci="poisson")
    monkeypatch.setattr(spill, "PARTITION_BYTES", 500)  # some twenty partitions
    monkeypatch.setattr(spill, "_STAGED", 7)
    monkeypatch.setattr(streamed_module, "_UNITS", 3)
    parted = compare_runs([a, b], resamples=DRAWS, permutations=DRAWS, seed=SEED, ci="poisson")
    for name, row in _rows(parted).items():
        other = _rows(whole)[name]
        sums_order = ("ci95", "p_value", "p_adjusted")  # weighted sums added in another order
        assert ({k: v for k, v in row.items() if k not in sums_order}
                == {k: v for k, v in other.items() if k not in sums_order})
        for key in sums_order:
            assert row[key] == pytest.approx(other[key], rel=1e-12)


def test_runs_past_the_records_kept_whole_are_streamed(
        mean_runs: tuple[Path, Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, _ = mean_runs
    assert "method" not in compare_runs([a, b], resamples=50, permutations=50).settings
    monkeypatch.setattr(compare_module, "EXACT_RECORDS", 149)
    comparison = compare_runs([a, b], resamples=50, permutations=50)
    assert comparison.settings["method"] == "poisson"
    assert "Poisson" in comparison.settings["ci"]


def test_corpus_bleu_by_hand_from_its_statistics(tmp_path: Path) -> None:
    a = _lexical_run(tmp_path / "a", ANSWERS_A, ["bleu"])
    b = _lexical_run(tmp_path / "b", ANSWERS_B, ["bleu"])
    row = _rows(compare_runs([a, b], resamples=DRAWS, permutations=DRAWS, seed=SEED,
                             ci="poisson"))["bleu"]
    details = [[json.loads(x)["details"]["bleu"] for x in (run / "records.jsonl")
                .read_text().splitlines()] for run in (a, b)]
    base, system = corpus_resampler("bleu", details[0]), corpus_resampler("bleu", details[1])
    both = corpus_resampler("bleu", details[0] + details[1])
    weights, flips = _weights([f"\0r{i}" for i in range(len(ANSWERS_A))])
    assert row["delta"] == pytest.approx(system(None)[0] - base(None)[0], rel=1e-12)
    resampled = system(weights.T) - base(weights.T)
    assert row["ci95"] == pytest.approx(list(percentile_interval(resampled)), rel=1e-12)
    moved = (flips.T < 0).astype(float)  # a unit's statistics change sides
    relabelled = both(np.hstack([moved, 1 - moved])) - both(np.hstack([1 - moved, moved]))
    assert row["p_value"] == pytest.approx(_p(row["delta"], relabelled), rel=1e-12)


@pytest.mark.parametrize("units", [4096, 2])  # conversations added a few at a time
def test_conversations_are_weighed_and_relabelled_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, units: int) -> None:
    monkeypatch.setattr(streamed_module, "_UNITS", units)
    base, system = tmp_path / "base", tmp_path / "system"
    evaluate(records_from_dicts(_conversations(1)), ["rouge1", "bleu"], bootstrap=20, out=base)
    evaluate(records_from_dicts(_conversations(2, own_ids=True)), ["rouge1", "bleu"],
             bootstrap=20, out=system)
    exact = compare_runs([base, system], resamples=DRAWS, permutations=DRAWS, seed=SEED)
    streamed = compare_runs([base, system], resamples=DRAWS, permutations=DRAWS, seed=SEED,
                            ci="poisson")
    assert "conversation" in streamed.settings["unit"]
    for name, row in _rows(streamed).items():
        for key in ("baseline_value", "system_value", "delta"):
            assert row[key] == pytest.approx(_rows(exact)[name][key], rel=1e-12)
        for key in ("wins", "ties", "losses", "n", "n_dropped"):
            assert row[key] == _rows(exact)[name][key]
    lines = {run: [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
             for run in (base, system)}
    units: dict[str, list[float]] = {}
    others = {(x.get("conversation"), x.get("turn"), x["id"] if x.get("conversation") is None
               else None): x for x in lines[system]}
    for x in lines[base]:
        other = others[(x.get("conversation"), x.get("turn"),
                        x["id"] if x.get("conversation") is None else None)]
        unit = x.get("conversation") or "\0" + x["id"]
        units.setdefault(unit, []).append(other["scores"]["rouge1"] - x["scores"]["rouge1"])
    weights, _ = _weights(list(units))
    means = np.array([np.mean(v) for v in units.values()])
    with np.errstate(invalid="ignore"):  # a resample that draws no conversation: undefined
        ratios = (weights.T @ means) / weights.sum(axis=0)
    assert _rows(streamed)["rouge1"]["ci95"] == pytest.approx(
        list(percentile_interval(ratios)), rel=1e-12)
    turns = {(r["metric"], r["turn"]): r for r in exact.per_turn}
    assert {(r["metric"], r["turn"]) for r in streamed.per_turn} == set(turns)
    for row in streamed.per_turn:
        assert row["delta"] == pytest.approx(turns[(row["metric"], row["turn"])]["delta"],
                                             rel=1e-12)
        assert row["n"] == turns[(row["metric"], row["turn"])]["n"]


def test_a_records_file_changed_since_its_summary_is_refused(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", ["q1", "q2"], {"m": [0.1, 0.2]})
    b = _write(tmp_path / "b", ["q1", "q2"], {"m": [0.3, 0.2]})
    path = b / "records.jsonl"
    path.write_text(path.read_text().replace("0.3", "0.4"))
    with pytest.raises(InputError, match=r"records\.jsonl"):
        compare_runs([a, b], ci="poisson")


def test_an_unknown_method_is_refused(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", ["q1", "q2"], {"m": [0.1, 0.2]})
    b = _write(tmp_path / "b", ["q1", "q2"], {"m": [0.3, 0.2]})
    with pytest.raises(UsageError, match="ci must be one of records, poisson"):
        compare_runs([a, b], ci="exact")


@pytest.mark.parametrize("ci", ["records", "poisson"])
def test_runs_sharing_no_id_are_an_error(tmp_path: Path, ci: str) -> None:
    a = _write(tmp_path / "a", ["q1", "q2"], {"m": [0.1, 0.2]})
    b = _write(tmp_path / "b", ["x1", "x2"], {"m": [0.3, 0.2]})
    with pytest.raises(InputError, match="no record id is common to all runs"):
        compare_runs([a, b], intersect=True, ci=ci)


def test_partitions_stay_within_the_open_files_allowed(
        mean_runs: tuple[Path, Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, _ = mean_runs
    runs = load_runs([a, b], None)
    monkeypatch.setattr(spill, "PARTITION_BYTES", 100)
    wanted = spill.partition_count(runs)
    assert wanted > 100  # one partition per 100 bytes of the larger file
    monkeypatch.setattr(spill, "_open_files_limit", lambda: 40)
    assert spill.partition_count(runs) == 20  # half of what may be held open


def test_differences_past_the_largest_float_are_an_error_naming_the_metric(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from rageval.cli import main

    a = _write(tmp_path / "a", ["q1", "q2", "q3"], {"m": [-1e308, 0.0, 0.0]})
    b = _write(tmp_path / "b", ["q1", "q2", "q3"], {"m": [1e308, -1e308, 1e308]})
    with pytest.raises(InputError, match="past the largest number a float holds") as caught:
        compare_runs([a, b], ci="poisson")
    assert caught.value.field == "m" and caught.value.path == str(b)
    assert main(["compare", str(a), str(b), "--ci", "poisson"], stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "field 'm'" in err and "Traceback" not in err
