"""Keeps bench/bench_bertscore.py working: a model directory and its layer, and a tiny run that
times the disk cache against none and agrees with bert-score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_scripts import load_bench


def _parse(bench, argv: tuple[str, ...]):
    """The bench's own parser, run on ``argv`` without running the benchmark."""
    captured = {}

    def stop(args):
        captured["args"] = args
        raise SystemExit(0)

    original = bench.run
    bench.run = stop
    try:
        with pytest.raises(SystemExit):
            bench.main(list(argv))
    finally:
        bench.run = original
    return captured["args"]


def test_a_model_directory_gives_its_last_layer_unless_told(tmp_path: Path) -> None:
    bench = load_bench("bench_bertscore")
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 3}))
    args = _parse(bench, ("--model-dir", str(tmp_path)))
    assert bench._model(args, tmp_path) == (str(tmp_path.resolve()),) * 2 + (3,)
    args = _parse(bench, ("--model-dir", str(tmp_path), "--num-layers", "2"))
    assert bench._model(args, tmp_path)[2] == 2
    with pytest.raises(SystemExit, match=r"config\.json"):
        bench._model(_parse(bench, ("--model-dir", str(tmp_path / "nothing"))), tmp_path)


@pytest.mark.slow
@pytest.mark.parity
def test_tiny_run_of_a_model_directory_times_the_cache_and_agrees(tmp_path: Path) -> None:
    pytest.importorskip("bert_score")
    bench = load_bench("bench_bertscore")
    model = bench._model_spec(bench.bs.DEFAULT_MODEL).source
    out = tmp_path / "result.json"
    assert bench.main(["--model-dir", model, "--num-layers", "6", "--pairs", "4",
                       "--systems", "2", "--repeats", "1", "--work-dir", str(tmp_path),
                       "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["config"]["layer"] == 6 and result["check"]["pairs_beyond_tolerance"] == 0
    disk = result["disk_cache"]
    assert disk["texts"] == 8 and 1 <= disk["files_written"] <= 4
    assert disk["cache_s"] > 0 and disk["cache_none_s"] > 0
