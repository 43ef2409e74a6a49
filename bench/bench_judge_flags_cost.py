"""Benchmark: what the judge flags (texts aimed at the judge, reasoning copied from them) cost
an offline replay, the run they weigh on most (no request to wait for).

``--records`` records (default 3,000, the demo's eight repeated, each answer and, unless
``--shared-contexts``, each context made distinct so no text is read twice) are judged once by
the scripted loopback judge of the test suite for ``judge:faithfulness`` and
``judge:answer_relevance``, then replayed offline through ``rageval.evaluate`` with the default
1,000 bootstrap resamples. The anchor is the same replay with the two flag rules replaced by
ones that flag nothing; the two are taken in turns, ``--repeats`` times (default 5), and the
medians are printed with the ratio and the cost per judged item.

    python bench/bench_judge_flags_cost.py [--records 3000] [--repeats 5] [--shared-contexts]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from judge_server import JudgeServer  # noqa: E402

import rageval.judge.rubric.metric as rubric_metric  # noqa: E402
from rageval.api import evaluate  # noqa: E402
from rageval.judge.llm.options import JudgeOptions  # noqa: E402

METRICS = ["judge:faithfulness", "judge:answer_relevance"]


def records(count: int, shared_contexts: bool) -> list[dict[str, Any]]:
    demo = [json.loads(line) for line in
            (ROOT / "fixtures" / "demo" / "records.jsonl").read_text().splitlines()]
    out = []
    for i in range(count):
        row = dict(demo[i % len(demo)], id=f"r{i}")
        row["answer"] = f"{row['answer']} ({i})"
        if not shared_contexts:
            row["contexts"] = [{**c, "text": f"{c['text']} ({i})"} for c in row["contexts"]]
        out.append(row)
    return out


def replay(path: Path, judge: JudgeOptions, flags: bool) -> float:
    real = (rubric_metric.aimed_at_judge, rubric_metric.reasoning_copied)
    if not flags:
        rubric_metric.aimed_at_judge = lambda texts: None  # type: ignore[assignment]
        rubric_metric.reasoning_copied = lambda reasoning, texts: None  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        evaluate(str(path), METRICS, judge=judge, bootstrap=1000)
        return time.perf_counter() - started
    finally:
        rubric_metric.aimed_at_judge, rubric_metric.reasoning_copied = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shared-contexts", action="store_true",
                        help="keep the demo's contexts as they are (texts repeat across records)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.jsonl"
        path.write_text("".join(json.dumps(r) + "\n"
                                for r in records(args.records, args.shared_contexts)))
        cache = str(Path(folder) / "cache.sqlite")
        with JudgeServer() as server:
            evaluate(str(path), METRICS, bootstrap=10, judge=JudgeOptions(
                model="m", base_url=server.base_url, cache=cache, concurrency=32))
        offline = JudgeOptions(model="m", cache=cache, offline=True)
        times: dict[str, list[float]] = {"without flags": [], "with flags": []}
        for _ in range(args.repeats):
            times["without flags"].append(replay(path, offline, flags=False))
            times["with flags"].append(replay(path, offline, flags=True))
    anchor, ours = (statistics.median(times[k]) for k in ("without flags", "with flags"))
    items = args.records * len(METRICS)
    print(f"offline replay, {args.records} records x {len(METRICS)} rubrics, "
          f"{'shared' if args.shared_contexts else 'distinct'} texts, median of {args.repeats}")
    print(f"  without flags (anchor) {anchor:.2f} s")
    print(f"  with flags             {ours:.2f} s")
    print(f"  ratio {ours / anchor:.3f}x, {(ours - anchor) / items * 1e6:.0f} us per judged item")


if __name__ == "__main__":
    main()
