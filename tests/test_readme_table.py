"""bench/readme_table.py: the benchmark table (docs/benchmarks.md, once the README's) comes
from the benchmarks' JSON."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from bench_scripts import load_bench

ROOT = Path(__file__).resolve().parent.parent


def _module() -> ModuleType:
    return load_bench("readme_table")


def _write(directory: Path) -> None:
    (directory / "score.json").write_text(json.dumps({"pairs": 40, "rows": [
        {"task": "bleu (sentence + corpus) vs sacrebleu", "anchor_s": 2.0, "rageval_s": 0.5,
         "ratio": 4.0, "mismatches": 0}]}))
    (directory / "judge.json").write_text(json.dumps({"latency_ms": 100, "throughput": [
        {"concurrency": 8, "ideal": 80.0, "anchor": 76.0, "rageval": 74.0,
         "rageval_over_ideal": 0.925}], "replay": {"judgments": 50, "seconds": 0.2}}))
    (directory / "judge_run.json").write_text(json.dumps({
        "records": 320, "metrics": ["judge:faithfulness", "judge:correctness"],
        "latency_ms": 100, "levels": [{"concurrency": 32, "ratio": 0.97,
                                        "anchor": {"rate": 300.0, "in_flight_median": 31.0},
                                        "rageval": {"rate": 291.0, "in_flight_median": 32.0}}]}))


def test_the_table_has_a_row_per_figure_and_says_what_is_missing(tmp_path: Path) -> None:
    _write(tmp_path)
    text, missing = _module().table(tmp_path)
    assert "| sacrebleu | 2.00 s | 0.50 s | 4.0x | identical |" in text
    assert "| 76/s | 74/s | 0.97x | 92% of ideal |" in text
    assert "offline replay of 50 cached judgments" in text
    assert ("| judge on a run: rageval score, 320 records x 2 rubrics, 32 in flight, 100 ms "
            "server | openai SDK on threads, same prompts | 300/s | 291/s | 0.97x | in flight 32 "
            "(SDK 31) |") in text
    assert sorted(missing) == ["bertscore.json", "trec.json"]


def test_the_readme_block_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    module = _module()
    _write(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{module.START}\nold table\n{module.END}\nafter\n")
    module.rewrite(readme, module.table(tmp_path)[0])
    content = readme.read_text()
    assert content.startswith("intro\n") and content.endswith(f"{module.END}\nafter\n")
    assert "old table" not in content and "sacrebleu" in content


def test_the_readme_has_the_block() -> None:
    module = _module()
    content = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert content.count(module.START) == 1 and content.count(module.END) == 1
