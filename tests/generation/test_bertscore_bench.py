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


def test_both_shapes_and_model_directories_are_timed_in_one_command(tmp_path: Path) -> None:
    bench = load_bench("bench_bertscore")
    assert bench._choices(_parse(bench, ())) == [("shape", "minilm")]
    args = _parse(bench, ("--device", "cuda", "--model-shape", "minilm", "roberta-large",
                          "--model-dir", str(tmp_path)))
    assert bench._choices(args) == [("dir", str(tmp_path)), ("shape", "minilm"),
                                    ("shape", "roberta-large")]
    args = _parse(bench, ("--model-shape", "minilm", "--num-layers", "4"))
    assert bench._model(args, tmp_path)[2] == 4  # a shape timed alone takes --num-layers


def _summary(model: str, bert: float, ours: float) -> dict:
    scenarios = [{"scenario": name, "pairs": 2000, "bert_score_s": bert, "rageval_s": ours,
                  "speedup": bert / ours}
                 for name in ("(a) one system, cold cache", "(b) 2nd system, same references")]
    return {"config": {"device_name": "NVIDIA H200", "device": "cuda", "torch_threads": 16,
                       "pairs": 2000, "systems": 2, "repeats": 3, "model": model},
            "versions": {"torch": "2.11", "transformers": "5.17"}, "scenarios": scenarios,
            "check": {"max_abs_diff": 1.65e-7, "pairs_beyond_tolerance": 0},
            "disk_cache": {"cost": 1.02, "files_written": 3, "texts": 4000}}


def test_the_markdown_table_names_the_device_and_every_model() -> None:
    bench = load_bench("bench_bertscore")
    table = bench.markdown([_summary("all-MiniLM-L6-v2, layer 6", 2.64, 1.32),
                            _summary("roberta-large shape, layer 17", 3.86, 1.93)],
                           "bench/bench_bertscore.py --device cuda")
    lines = table.splitlines()
    assert lines[0].startswith("Measured on NVIDIA H200 (cuda; torch 2.11")
    assert "`bench/bench_bertscore.py --device cuda`, 2,000 pairs x 2 systems" in lines[0]
    assert lines[2:4] == ["| model | scenario | bert-score | rageval | speedup |",
                          "|---|---|---:|---:|---:|"]
    assert lines[4] == "| all-MiniLM-L6-v2, layer 6 | (a) one system, cold cache | 2.64 s | " \
                       "1.32 s | 2.00x |"
    assert lines[5].startswith("|  | (b) 2nd system")
    assert lines[6].startswith("| roberta-large shape, layer 17 | (a)")
    assert "Values agree (max difference 1.65e-07" in lines[-1]
