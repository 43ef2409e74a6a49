"""The benchmark table of docs/benchmarks.md, regenerated from the benchmarks' own JSON output.

    python bench/bench_trec.py --json out/trec.json
    python bench/bench_score.py --json out/score.json
    python bench/bench_bertscore.py --pairs 500 --json out/bertscore.json
    python bench/bench_judge.py --json out/judge.json
    python bench/bench_judge_run.py --json out/judge_run.json
    python bench/readme_table.py out/            # rewrite the table in docs/benchmarks.md
    python bench/readme_table.py out/ --print    # only print it

Every file present in the directory gives its rows (a missing one is left out and said so);
the table goes between the ``<!-- bench-table -->`` and ``<!-- /bench-table -->`` lines of the
page (``--page``, default docs/benchmarks.md), with the machine it was measured on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench-table -->", "<!-- /bench-table -->"
HEADER = ("| benchmark | anchor | anchor's figure | rageval's | ratio | values |\n"
          "| --- | --- | ---: | ---: | ---: | --- |")

Row = tuple[str, str, str, str, str, str]


def _s(seconds: float) -> str:
    return f"{seconds:.2f} s"


def trec_rows(data: dict[str, Any]) -> list[Row]:
    config, sides = data["config"], data["sides"]
    anchor, ours = sides["pytrec_eval"], sides["rageval"]
    what = f"trec-eval, {config['queries']:,} topics x {config['docs']:,} docs, 5 measures"
    same = "identical" if data["agree"] else "DIFFER"
    return [
        (what, "pytrec_eval", _s(anchor["median_s"]), _s(ours["median_s"]),
         f"{anchor['median_s'] / ours['median_s']:.1f}x", same),
        (f"{what}: peak memory", "pytrec_eval", f"{anchor['peak_mb']:.0f} MB",
         f"{ours['peak_mb']:.0f} MB", f"{anchor['peak_mb'] / ours['peak_mb']:.1f}x", ""),
    ]


def score_rows(data: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for row in data["rows"]:
        metrics, anchor = row["task"].split(" vs ")
        same = "identical" if row["mismatches"] == 0 else f"{row['mismatches']} differ"
        rows.append((f"rageval score: {metrics}, {data['pairs']:,} pairs, file to file",
                     anchor, _s(row["anchor_s"]), _s(row["rageval_s"]), f"{row['ratio']:.1f}x",
                     same))
    return rows


def bertscore_rows(data: dict[str, Any]) -> list[Row]:
    config = data["config"]
    check = data["check"]
    same = (f"max diff {check['max_abs_diff']:.0e}" if check["pairs_beyond_tolerance"] == 0
            else f"{check['pairs_beyond_tolerance']} beyond {check['tolerance']:g}")
    return [(f"BERTScore {row['scenario'][4:]}, {row['pairs']:,} pairs, {config['model_shape']}"
             f" on {config['device']}", "bert-score", _s(row["bert_score_s"]),
             _s(row["rageval_s"]), f"{row['speedup']:.2f}x", same)
            for row in data["scenarios"]]


def judge_rows(data: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for level in data.get("throughput", []):
        rows.append((f"judge, {level['concurrency']} in flight, {data['latency_ms']:g} ms "
                     f"server (ideal {level['ideal']:.0f}/s)", "openai SDK on threads",
                     f"{level['anchor']:.0f}/s", f"{level['rageval']:.0f}/s",
                     f"{level['rageval'] / level['anchor']:.2f}x",
                     f"{level['rageval_over_ideal']:.0%} of ideal"))
    if "replay" in data:
        replay = data["replay"]
        rows.append((f"judge, offline replay of {replay['judgments']:,} cached judgments", "",
                     "", _s(replay["seconds"]), "", ""))
    return rows


def judge_run_rows(data: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for level in data.get("levels", []):
        rows.append((f"judge on a run: rageval score, {data['records']:,} records x "
                     f"{len(data['metrics'])} rubrics, {level['concurrency']} in flight, "
                     f"{data['latency_ms']:g} ms server", "openai SDK on threads, same prompts",
                     f"{level['anchor']['rate']:.0f}/s", f"{level['rageval']['rate']:.0f}/s",
                     f"{level['ratio']:.2f}x",
                     f"in flight {level['rageval']['in_flight_median']:g} "
                     f"(SDK {level['anchor']['in_flight_median']:g})"))
    return rows


ADAPTERS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "trec.json": trec_rows,
    "score.json": score_rows,
    "bertscore.json": bertscore_rows,
    "judge.json": judge_rows,
    "judge_run.json": judge_run_rows,
}


def table(directory: Path) -> tuple[str, list[str]]:
    """The markdown table of every benchmark file found, and the files missing."""
    rows: list[Row] = []
    missing = []
    for name, adapter in ADAPTERS.items():
        path = directory / name
        if not path.exists():
            missing.append(name)
            continue
        rows += adapter(json.loads(path.read_text(encoding="utf-8")))
    lines = [HEADER, *("| " + " | ".join(row) + " |" for row in rows)]
    machine = (f"Measured on {os.cpu_count()} CPUs, Python {platform.python_version()}, medians "
               "of each benchmark's repeats; ratio = anchor / rageval (time or memory).")
    return "\n".join([machine, "", *lines]), missing


def rewrite(page: Path, text: str) -> None:
    content = page.read_text(encoding="utf-8")
    if START not in content or END not in content:
        sys.exit(f"readme_table: {page} has no {START} ... {END} block")
    head, rest = content.split(START, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="where the benchmarks wrote their JSON")
    parser.add_argument("--page", "--readme", dest="page", type=Path, default=PAGE,
                        help="the page holding the table (default docs/benchmarks.md)")
    parser.add_argument("--print", action="store_true", help="print the table, change nothing")
    args = parser.parse_args()
    text, missing = table(args.directory)
    for name in missing:
        print(f"readme_table: no {name} in {args.directory}; its rows are left out",
              file=sys.stderr)
    if args.print:
        print(text)
    else:
        rewrite(args.page, text)
        print(f"rewrote the benchmark table of {args.page}")


if __name__ == "__main__":
    main()
