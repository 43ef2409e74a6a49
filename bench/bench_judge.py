"""Benchmark: judge throughput against a slow OpenAI-compatible endpoint, and offline replay.

The endpoint is the scripted loopback judge of the test suite (``tests/judge_server.py``), run in
a separate process so that the server's work does not share a GIL with the client, answering
every request after ``--latency-ms`` (default 100 ms), as a remote model would.

Throughput, at each concurrency (default 1, 8, 32, 64):

* ideal: ``concurrency / latency`` judgments per second, what a client with zero overhead gets;
* anchor: bare ``openai`` SDK calls on a thread pool of that size, sending the same requests
  (rendered beforehand, untimed; no parsing, no cache): the floor any SDK-based judge pays;
* rageval: ``rageval.evaluate(records, ["judge:fluency"], judge=...)`` end to end: rendering,
  cache keys, requests, parsing, every reply committed to the SQLite cache as it arrives (those
  that arrive together in one transaction).

Each is run on fresh records (and an empty cache), so every judgment is a request. The target is
at least 90% of ideal up to 64 in flight.

Offline replay: ``--replay`` judgments (default 10,000) are put in a cache, then
``evaluate(..., offline=True)`` replays them with no network, end to end (target: under 2 s).

Anchor and rageval runs are taken in turns at each level, so that both meet the same machine.

    python bench/bench_judge.py [--latency-ms 100] [--concurrency 1 8 32 64] [--repeats 3]
                                [--skip-throughput] [--skip-replay] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import rageval  # noqa: E402
from rageval.api import evaluate  # noqa: E402
from rageval.core.metric import ScoreOptions  # noqa: E402
from rageval.core.records import Record, records_from_dicts  # noqa: E402
from rageval.judge.llm.cache.store import JudgeCache  # noqa: E402
from rageval.judge.llm.options import JudgeOptions  # noqa: E402
from rageval.judge.rubric.metric import JudgeMetric  # noqa: E402
from rageval.judge.rubric.render import response_format  # noqa: E402

MODEL = "bench-judge"
_SERVER = """
import sys, time
sys.path.insert(0, {tests!r})
from judge_server import JudgeServer
with JudgeServer(latency_s={latency!r}) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
"""


def start_server(latency_s: float) -> tuple[subprocess.Popen[str], str]:
    code = _SERVER.format(tests=str(ROOT / "tests"), latency=latency_s)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def make_records(n: int, tag: str) -> list[Record]:
    """Answer-only records, distinct per ``tag`` so that no run finds another's replies."""
    return records_from_dicts([
        {"id": f"{tag}-{i}", "answer": f"Run {tag}: answer number {i} explains the result in "
                                      f"plain words and gives one example of it."}
        for i in range(n)])


def anchor_rate(base_url: str, concurrency: int, n: int, tag: str) -> float:
    """Judgments per second of bare SDK calls on a thread pool, sending the very requests
    rageval sends (rendered beforehand, untimed)."""
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    metric = JudgeMetric("fluency", options=ScoreOptions(judge=JudgeOptions(model=MODEL)))
    fmt = response_format(metric.rubric)
    bodies = [metric.units(record)[0].messages for record in make_records(n, tag)]

    def call(i: int) -> str | None:
        reply = client.chat.completions.create(model=MODEL, temperature=0, messages=bodies[i],
                                               response_format=fmt)  # type: ignore[arg-type]
        return reply.choices[0].message.content

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        replies = list(pool.map(call, range(n)))
    elapsed = time.perf_counter() - started
    assert all(replies)
    return n / elapsed


def rageval_rate(base_url: str, concurrency: int, n: int, tag: str, cache_dir: str) -> float:
    """Judgments per second of ``evaluate`` with the judge, end to end, on an empty cache."""
    records = make_records(n, tag)
    options = JudgeOptions(model=MODEL, base_url=base_url, concurrency=concurrency,
                           cache=os.path.join(cache_dir, f"{tag}.sqlite"), max_retries=0)
    started = time.perf_counter()
    results = evaluate(records, ["judge:fluency"], judge=options, bootstrap=1)
    elapsed = time.perf_counter() - started
    summary = results.summary["judge:fluency"]
    assert summary.n == n and results.manifest["judge"]["requests"] == n, summary
    return n / elapsed


def throughput(args: argparse.Namespace, base_url: str, cache_dir: str) -> list[dict]:
    """Every level's figures (each repeat's rate, and the medians), printed as they come."""
    latency = args.latency_ms / 1000
    print(f"\nThroughput, {args.latency_ms:g} ms per reply, median of {args.repeats} "
          "(judgments/s):")
    header = f"{'concurrency':>11} {'judgments':>9} {'ideal':>8} {'anchor':>8} {'rageval':>8}"
    print(header + f" {'rageval/ideal':>13} {'rageval/anchor':>14}")
    # Warm-up, untimed: imports, the SDK's first-use model building, the first connection.
    anchor_rate(base_url, 2, 4, "warm")
    rageval_rate(base_url, 2, 4, "warm", cache_dir)
    levels = []
    for c in args.concurrency:
        n = max(args.min_judgments, c * args.rounds)
        ideal = c / latency
        anchors: list[float] = []
        ours: list[float] = []
        # Taken in turns, so that both meet the same machine (others' load comes and goes).
        for r in range(args.repeats):
            anchors.append(anchor_rate(base_url, c, n, f"a{c}r{r}"))
            ours.append(rageval_rate(base_url, c, n, f"c{c}r{r}", cache_dir))
        anchor, rageval = statistics.median(anchors), statistics.median(ours)
        print(f"{c:>11} {n:>9} {ideal:>8.1f} {anchor:>8.1f} {rageval:>8.1f}"
              f" {rageval / ideal:>12.1%} {rageval / anchor:>13.2f}x", flush=True)
        levels.append({"concurrency": c, "judgments": n, "ideal": ideal, "anchor": anchor,
                       "rageval": rageval, "rageval_over_ideal": rageval / ideal,
                       "rageval_over_anchor": rageval / anchor, "anchor_runs": anchors,
                       "rageval_runs": ours})
    return levels


def fill_cache(path: str, records: list[Record]) -> JudgeOptions:
    """A cache holding a reply for every record (the keys a replay will look up)."""
    options = JudgeOptions(model=MODEL, cache=path, offline=True)
    metric = JudgeMetric("fluency", options=ScoreOptions(judge=options))
    with JudgeCache(path) as cache:
        for i, record in enumerate(records):
            unit = metric.units(record)[0]
            cache.put(unit.key, {"model": MODEL}, f'{{"reasoning": "r{i}", "score": {1 + i % 5}}}',
                      {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110})
    return options


def replay(args: argparse.Namespace, cache_dir: str) -> dict:
    records = make_records(args.replay, "replay")
    options = fill_cache(os.path.join(cache_dir, "replay.sqlite"), records)
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        results = evaluate(records, ["judge:fluency"], judge=options)
        times.append(time.perf_counter() - started)
        assert results.manifest["judge"]["cache"]["hits"] == args.replay
        assert results.summary["judge:fluency"].n == args.replay
    print(f"\nOffline replay of {args.replay:,} judgments (evaluate end to end, 1000-resample CI),"
          f" median of {args.repeats}: {statistics.median(times):.3f} s "
          f"(min {min(times):.3f}, max {max(times):.3f}; target < 2 s)")
    return {"judgments": args.replay, "seconds": statistics.median(times), "runs": times}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--rounds", type=int, default=40,
                        help="judgments per level = max(--min-judgments, concurrency x rounds)")
    parser.add_argument("--min-judgments", type=int, default=40)
    parser.add_argument("--replay", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument("--json", metavar="PATH",
                        help="also write every figure (each repeat's too) to PATH as JSON")
    args = parser.parse_args()
    about = {"rageval": rageval.__version__, "openai": openai.__version__,
             "python": platform.python_version(), "cpus": os.cpu_count()}
    print(f"rageval {about['rageval']}, openai {about['openai']}, Python {about['python']}, "
          f"{about['cpus']} CPUs")
    figures: dict = {**about, "latency_ms": args.latency_ms, "repeats": args.repeats}
    with tempfile.TemporaryDirectory(prefix="rageval-bench-judge-") as cache_dir:
        if not args.skip_throughput:
            server, base_url = start_server(args.latency_ms / 1000)
            try:
                figures["throughput"] = throughput(args, base_url, cache_dir)
            finally:
                assert server.stdin is not None
                server.stdin.close()
                server.wait(timeout=10)
        if not args.skip_replay:
            figures["replay"] = replay(args, cache_dir)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
