"""Loading records: rageval's validating loader against the bare JSON parse it is built on.

    python bench/bench_records.py [--records 100000] [--repeats 3]

Anchors: ``json.loads`` of every line with no validation (the floor any JSONL loader pays) and
polars' ``read_ndjson``. rageval validates every field and keeps file/line positions for errors.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

from rageval.core.records import load_records


def write_records(path: Path, count: int) -> None:
    passage = "lorem ipsum dolor sit amet " * 11
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            docs = [f"d{index}-{rank}" for rank in range(5)]
            item = {
                "id": f"q{index}",
                "query": "what are the main revenue sources of the company?",
                "contexts": [
                    {"id": d, "text": passage, "score": 1.0 / (r + 1)} for r, d in enumerate(docs)
                ],
                "answer": passage[:200],
                "reference": passage[:150],
                "judgments": {d: index % 3 for d in docs},
            }
            handle.write(json.dumps(item) + "\n")


def json_lines(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return len([json.loads(line) for line in handle])


def timed(fn: Callable[[Path], object], path: Path, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(path)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        write_records(path, args.records)
        size_mb = path.stat().st_size / 1e6
        sides = {
            "json.loads per line (no validation)": json_lines,
            "polars.read_ndjson (no validation)": pl.read_ndjson,
            "rageval load_records (validated)": load_records,
        }
        print(f"{args.records} records, {size_mb:.0f} MB, median of {args.repeats} runs")
        base = None
        for name, fn in sides.items():
            median = statistics.median(timed(fn, path, args.repeats))
            base = base if base is not None else median
            print(f"{name:40s} {median:7.2f} s   x{median / base:.2f} of json.loads")


if __name__ == "__main__":
    main()
