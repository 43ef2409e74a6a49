"""Benchmark: the judge on the shape of a real run, counted where the requests arrive.

``rageval score`` as a user runs it (a child process: start-up, reading, rendering, the cache,
every reply written to it, the summary), on ``--records`` records (default 320) judged for
``judge:faithfulness`` and ``judge:correctness`` at ``--concurrency`` (default 8, 32, 64) on an
empty cache, against the scripted loopback judge of the test suite answering each request after
``--latency-ms`` (default 100 ms), in a process of its own.

The anchor is bare ``openai`` SDK calls on a thread pool of the same size, sending the very
prompts rageval sent (read back from its cache: messages, response format, parameters), with
nothing else to do. Both are counted at the server, by arrival time: the rate is the requests
over the span from the first arrival to the last, and the requests in flight are sampled per
100 ms bucket (arrivals in the bucket times the latency), so that a stall (a bucket with few
arrivals in mid-run) shows where it happens. The two sides are taken in turns, ``--repeats``
times at each level; medians are printed with the ratio.

    python bench/bench_judge_run.py [--records 320] [--concurrency 8 32 64] [--repeats 3]
                                    [--latency-ms 100] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import rageval  # noqa: E402
from rageval.judge.llm.cache.store import JudgeCache  # noqa: E402

MODEL = "bench-judge"
METRICS = ["judge:faithfulness", "judge:correctness"]
_SERVER = """
import json, sys
sys.path.insert(0, {tests!r})
from judge_server import JudgeServer
with JudgeServer(latency_s={latency!r}) as server:
    print(server.base_url, flush=True)
    for line in sys.stdin:  # "arrivals": hand over the arrival times so far, and forget them
        print(json.dumps(server.arrivals), flush=True)
        server.arrivals.clear()
"""


class Server:
    """The loopback judge in a process of its own, and the arrival times it saw."""

    def __init__(self, latency_s: float) -> None:
        code = _SERVER.format(tests=str(ROOT / "tests"), latency=latency_s)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()

    def arrivals(self) -> list[float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("arrivals\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def write_records(path: Path, n: int, tag: str) -> None:
    """Records with everything both rubrics read, distinct per ``tag`` (no run finds
    another's replies)."""
    lines = []
    for i in range(n):
        lines.append(json.dumps({
            "id": f"{tag}-{i}", "query": f"What does report {tag}-{i} say about revenue?",
            "contexts": [f"Report {tag}-{i}: revenue grew by {i % 17} percent in the year, "
                         "driven by services.", f"Report {tag}-{i} also lists {i % 7} new "
                         "offices opened abroad."],
            "answer": f"Report {tag}-{i} says revenue grew {i % 17} percent, mostly from "
                      "services.",
            "reference": f"Revenue grew by {i % 17} percent, driven by services."}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def rageval_run(server: Server, workdir: Path, n: int, concurrency: int, tag: str) -> Path:
    """``rageval score`` in a child process on an empty cache; the cache it filled."""
    records, cache = workdir / f"{tag}.jsonl", workdir / f"{tag}.sqlite"
    write_records(records, n, tag)
    argv = [shutil.which("rageval") or "rageval", "score", str(records),
            *[a for m in METRICS for a in ("-m", m)], "--judge-model", MODEL,
            "--judge-base-url", server.base_url, "--judge-concurrency", str(concurrency),
            "--judge-max-retries", "0", "--cache", str(cache), "--out", str(workdir / tag),
            "--no-progress"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "OPENAI_API_KEY": "unused"})
    if done.returncode != 0:
        raise SystemExit(f"rageval score failed ({done.returncode}):\n{done.stderr}")
    summary = json.loads((workdir / tag / "summary.json").read_text(encoding="utf-8"))
    assert summary["manifest"]["judge"]["requests"] == n * len(METRICS), summary["manifest"]
    return cache


def cached_requests(cache: Path) -> list[dict[str, Any]]:
    """The requests rageval sent, as its cache recorded them."""
    with JudgeCache(str(cache)) as opened:
        return [entry.request for entry in opened.entries()]


def anchor_run(server: Server, requests: list[dict[str, Any]], concurrency: int) -> None:
    """Bare SDK calls on a thread pool, the same prompts (no rendering, no cache)."""
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)

    def call(request: dict[str, Any]) -> str | None:
        reply = client.chat.completions.create(
            model=MODEL, messages=request["messages"], response_format=request["response_format"],
            **request["params"])
        return reply.choices[0].message.content

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        replies = list(pool.map(call, requests))
    assert all(replies)


def shape(arrivals: list[float], latency_s: float) -> dict[str, Any]:
    """Rate over the span of arrivals; requests in flight per 100 ms bucket (arrivals in the
    bucket times the latency in buckets)."""
    start, end = arrivals[0], arrivals[-1]
    rate = (len(arrivals) - 1) / (end - start) if end > start else float("nan")
    buckets = [0] * (int((end - start) / 0.1) + 1)
    for t in arrivals:
        buckets[int((t - start) / 0.1)] += 1
    flight = [b * latency_s / 0.1 for b in buckets[1:-1]] or [float(buckets[0])]
    return {"rate": rate, "in_flight_median": statistics.median(flight),
            "lowest_bucket": min(buckets[1:-1] or buckets), "buckets": buckets}


def level(server: Server, workdir: Path, args: argparse.Namespace, c: int) -> dict[str, Any]:
    latency = args.latency_ms / 1000
    ours: list[dict[str, Any]] = []
    anchors: list[dict[str, Any]] = []
    for r in range(args.repeats):  # in turns, so that both meet the same machine
        server.arrivals()
        cache = rageval_run(server, workdir, args.records, c, f"c{c}r{r}")
        ours.append(shape(server.arrivals(), latency))
        anchor_run(server, cached_requests(cache), c)
        anchors.append(shape(server.arrivals(), latency))
    mid = {side: {key: statistics.median(run[key] for run in runs)
                  for key in ("rate", "in_flight_median", "lowest_bucket")}
           for side, runs in (("rageval", ours), ("anchor", anchors))}
    out = {"concurrency": c, "requests": args.records * len(METRICS), **mid,
           "ratio": mid["rageval"]["rate"] / mid["anchor"]["rate"],
           "rageval_runs": ours, "anchor_runs": anchors}
    print(f"{c:>11} {out['requests']:>8} {mid['anchor']['rate']:>8.1f} "
          f"{mid['rageval']['rate']:>8.1f} {out['ratio']:>8.2f}x "
          f"{mid['anchor']['in_flight_median']:>7.1f} {mid['rageval']['in_flight_median']:>7.1f}"
          f" {mid['anchor']['lowest_bucket']:>6g} {mid['rageval']['lowest_bucket']:>6g}",
          flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=320)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    about = {"rageval": rageval.__version__, "openai": openai.__version__,
             "python": platform.python_version(), "cpus": os.cpu_count()}
    print(f"rageval {about['rageval']}, openai {about['openai']}, Python {about['python']}, "
          f"{about['cpus']} CPUs; {args.records} records x {len(METRICS)} rubrics, "
          f"{args.latency_ms:g} ms per reply, median of {args.repeats}")
    print(f"{'concurrency':>11} {'requests':>8} {'anchor/s':>8} {'rageval/s':>8} {'ratio':>9} "
          f"{'flight':>7} {'flight':>7} {'low':>6} {'low':>6}")
    print(f"{'':>11} {'':>8} {'':>8} {'':>8} {'':>9} {'anchor':>7} {'rageval':>7} "
          f"{'anchor':>6} {'rageval':>6}")
    server = Server(args.latency_ms / 1000)
    figures: dict[str, Any] = {**about, "records": args.records, "metrics": METRICS,
                               "latency_ms": args.latency_ms, "repeats": args.repeats}
    try:
        with tempfile.TemporaryDirectory(prefix="rageval-bench-judge-run-") as tmp:
            workdir = Path(tmp)
            rageval_run(server, workdir, 8, 4, "warm")  # untimed: first imports, connections
            time.sleep(0.2)
            figures["levels"] = [level(server, workdir, args, c) for c in args.concurrency]
    finally:
        server.close()
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
