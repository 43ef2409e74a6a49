"""The Ray engine's overhead: ``rageval score`` on the local engine and on a three-node Ray
cluster, side by side, on the same generated records.

    python bench/bench_ray_cluster.py [--records 100000,1000000] [--repeats 3]
        [--worker-cpus 1] [--metrics ndcg@10 map ...] [--data-dir bench/data] [--json out.json]

The cluster is real: a head (no CPU, as KubeRay heads usually are) and two worker nodes,
each its own ``ray start`` process with its own raylet and object store (the tests' launcher,
``tests/engine/ray_nodes.py``), started once and stopped at the end. Each run is one
``rageval score FILE -m ... --out TMP --no-progress`` process (``--engine ray --ray-address
ADDR`` for the Ray side), the two engines taking turns. Wall time and the driver's peak RSS
come from ``os.wait4``; the cluster's peak RSS is the largest sum, sampled every 0.5 s, of the
resident memory of every process of the three nodes (the actors scoring the blocks, the
object stores' shared memory as each process has touched it: an overestimate where pages are
shared). Medians over ``--repeats``; the first run of each engine at each size is checked to
write the same records.jsonl, byte for byte.

The records are ``bench_stream.py``'s (5 contexts of ~40 words, an answer, a reference,
graded judgments), written once to ``--data-dir`` and reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "engine"))

from bench_stream import records_file  # noqa: E402
from ray_nodes import LocalCluster, Node  # noqa: E402

METRICS = ["ndcg@10", "map", "mrr", "recall@5", "rouge1", "rougeL", "bleu"]
_RUN = "import sys; from rageval.cli import main; sys.exit(main())"


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


class ClusterMemory:
    """The largest resident memory of the nodes' processes together while it runs."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ClusterMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            pids = [pid for node in self.nodes for pid in node.pids()]
            self.peak = max(self.peak, rss_kib(pids))
            self._stop.wait(0.5)


def run_once(path: Path, metrics: list[str], env: dict[str, str],
             extra: list[str]) -> dict[str, Any]:
    """One ``rageval score`` process: wall seconds, peak RSS (KiB), the records' hash."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-c", _RUN, "score", str(path.resolve()),
               *(a for m in metrics for a in ("-m", m)), "--out", str(out), "--no-progress",
               *extra]
        with open(Path(tmp) / "log", "w+b") as log:
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    cwd=tmp)
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            except BaseException:  # interrupted: the run goes too
                proc.kill()
                proc.wait()
                raise
            wall = time.perf_counter() - start
            if os.waitstatus_to_exitcode(status) != 0:
                log.seek(0)
                sys.stderr.write(log.read().decode(errors="replace")[-5000:])
                raise SystemExit(f"bench: `{' '.join(cmd)}` failed")
        digest = hashlib.sha256((out / "records.jsonl").read_bytes()).hexdigest()
    return {"wall_s": wall, "peak_rss_kib": usage.ru_maxrss, "records_sha256": digest}


def measure(path: Path, count: int, cluster: LocalCluster,
            args: argparse.Namespace) -> dict[str, Any]:
    env = cluster.environment()
    on_ray = ["--engine", "ray", "--ray-address", cluster.address]
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
    for _ in range(args.repeats):  # the engines take turns: the machine's load falls on both
        runs["local"].append(run_once(path, args.metrics, env, []))
        with ClusterMemory(cluster.nodes) as memory:
            runs["ray"].append(run_once(path, args.metrics, env, on_ray))
        runs["ray"][-1]["cluster_peak_rss_kib"] = memory.peak
        print(f"  {count:>9,}  local {runs['local'][-1]['wall_s']:7.1f} s   "
              f"ray {runs['ray'][-1]['wall_s']:7.1f} s", flush=True)
    same = runs["local"][0]["records_sha256"] == runs["ray"][0]["records_sha256"]
    row: dict[str, Any] = {"records": count, "same_records_jsonl": same, "runs": runs}
    for engine, done in runs.items():
        row[engine] = {"wall_s": statistics.median(r["wall_s"] for r in done),
                       "rss_mib": statistics.median(r["peak_rss_kib"] for r in done) / 1024}
    row["ray"]["cluster_rss_mib"] = statistics.median(
        r["cluster_peak_rss_kib"] for r in runs["ray"]) / 1024
    row["ratio"] = row["ray"]["wall_s"] / row["local"]["wall_s"]
    return row


def print_table(rows: list[dict[str, Any]], nodes: str) -> None:
    print(f"\nrageval score, local engine vs Ray ({nodes}); medians")
    print(f"{'records':>10} {'local s':>9} {'ray s':>9} {'ray/local':>9} {'local MiB':>10} "
          f"{'driver MiB':>11} {'cluster MiB':>12}  same records.jsonl")
    for r in rows:
        print(f"{r['records']:>10,} {r['local']['wall_s']:>9.1f} {r['ray']['wall_s']:>9.1f} "
              f"{r['ratio']:>9.2f} {r['local']['rss_mib']:>10.0f} {r['ray']['rss_mib']:>11.0f} "
              f"{r['ray']['cluster_rss_mib']:>12.0f}  {r['same_records_jsonl']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100000",
                        help="comma-separated sizes (default 100000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--metrics", nargs="+", default=METRICS)
    parser.add_argument("--worker-cpus", type=int, default=1,
                        help="CPUs each of the two worker nodes offers (default 1)")
    parser.add_argument("--object-store-mb", type=int, default=400,
                        help="each node's object store (default 400 MiB)")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "bench" / "data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sizes = [int(s) for s in args.records.split(",")]
    paths = {n: records_file(args.data_dir, n, args.seed) for n in sizes}
    nodes = (f"head with no CPU + 2 workers x {args.worker_cpus} CPU, object stores of "
             f"{args.object_store_mb} MiB, on {os.cpu_count()} cores")
    rows = []
    with LocalCluster(head_cpus=0, worker_cpus=(args.worker_cpus,) * 2,
                      object_store=args.object_store_mb * 2**20) as cluster:
        time.sleep(5)  # the nodes settle before their idle footprint is taken
        idle = rss_kib([pid for node in cluster.nodes for pid in node.pids()]) / 1024
        for n in sizes:
            rows.append(measure(paths[n], n, cluster, args))
    print_table(rows, nodes)
    print(f"the cluster's processes idle, before the first run: {idle:.0f} MiB")
    if args.json:
        args.json.write_text(json.dumps({"nodes": nodes, "metrics": args.metrics,
                                         "idle_cluster_mib": idle, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
