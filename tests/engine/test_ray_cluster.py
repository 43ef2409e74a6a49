"""The Ray engine on a real multi-node cluster: a head and two worker nodes, each its own
``ray start`` process with its own resources and object store (:mod:`ray_nodes`), scored
through ``rageval score --engine ray --ray-address``; then one worker node lost mid-run.

The head offers no CPU (as KubeRay heads usually do), so every block is scored on a worker
node, while the run's shared judge cache and limits live beside the driver, on the head. The
loopback judge is watched request by request (:mod:`watched_judge`): which process asked (by
the connection's port), when, and for how long, and it can hold every reply, so that the node
is lost while requests of its own are surely in flight.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ray_nodes import LocalCluster
from test_ray_engine import write_records
from watched_judge import Request, WatchedJudge, most_at_once, most_started_within

pytest.importorskip("ray", reason="the Ray engine needs the ray extra")
if not sys.platform.startswith("linux"):
    pytest.skip("the nodes' processes and connections are found in /proc",
                allow_module_level=True)

pytestmark = pytest.mark.slow

KEY = "sk-cluster-test-0123456789"
ENV = "RAGEVAL_TEST_CLUSTER_KEY"
METRICS = ["ndcg@3", "map", "rouge1", "rougeL", "bleu", "judge:faithfulness"]
RECORDS = 48
BATCH = 4  # 12 blocks
CONCURRENCY = 4
RPM = 600.0  # one request started every 0.1 s, across the cluster
LATENCY_S = 0.3
# Ray marks a lost node dead after its health checks fail (by default 5 checks 3 s apart),
# and only then restarts its actors elsewhere; rageval takes the leases of a dead worker back
# after its lease timeout (by default 30 s). Both shortened, so the test stays short.
HEALTH = {"health_check_period_ms": 1000, "health_check_timeout_ms": 1000,
          "health_check_failure_threshold": 3}
LEASE_TIMEOUT_S = "5"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(head_cpus=0, worker_cpus=(2, 2), system_config=HEALTH) as running:
        yield running


@pytest.fixture
def whole(cluster: LocalCluster) -> LocalCluster:
    cluster.restore()  # a node another test lost comes back
    return cluster


@pytest.fixture(scope="module")
def judge() -> Iterator[WatchedJudge]:
    with WatchedJudge(expected_key=KEY, latency_s=LATENCY_S) as server:
        yield server


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_records(tmp_path_factory.mktemp("cluster") / "records.jsonl", RECORDS)


@pytest.fixture(scope="module")
def local_run(data: Path, judge: WatchedJudge, cluster: LocalCluster) -> Path:
    """The local engine's run, which every Ray run must equal."""
    out = data.parent / "local"
    assert score(data, judge, out, cluster.environment()).returncode == 0
    return out


def score(data: Path, judge: WatchedJudge, out: Path, env: dict[str, str],
          *extra: str) -> subprocess.Popen[bytes]:
    """``rageval score`` in a process of its own, with this checkout's rageval; waited for
    unless ``extra`` starts with ``--background``."""
    background = extra[:1] == ("--background",)
    argv = [sys.executable, "-c", "import sys; from rageval.cli import main; sys.exit(main())",
            "score", str(data), *(a for m in METRICS for a in ("-m", m)), "--no-progress",
            "--bootstrap", "50", "--seed", "3", "--batch-size", str(BATCH),
            "--judge-model", "judge-model", "--judge-base-url", judge.base_url,
            "--judge-api-key-env", ENV, "--judge-concurrency", str(CONCURRENCY),
            "--judge-rpm", str(RPM), "--cache", str(out) + ".sqlite", "--out", str(out),
            *extra[background:]]
    with Path(str(out) + ".log").open("wb") as log:
        process = subprocess.Popen(argv, env={**env, ENV: KEY}, stdout=log,
                                   stderr=subprocess.STDOUT)
    if not background:
        process.wait(timeout=300)
    return process


def on_ray(cluster: LocalCluster) -> tuple[str, ...]:
    return ("--engine", "ray", "--ray-address", cluster.address, "--ray-workers", "2")


def assert_same_run(ray_out: Path, local_out: Path) -> list[str]:
    """Every record's values and details, and the summary's values, CIs and signatures, as
    the local engine wrote them; the manifests alike but for where and when each ran. A
    record whose reply a retried block replayed from the cache says so (``cached``) where
    the local run asked for it: the ids of those are returned, and the judge's account
    (requests, cache hits, tokens) is checked against them."""
    log = Path(str(ray_out) + ".log").read_text(errors="replace")
    rows = [json.loads(line) for line in (ray_out / "records.jsonl").read_text().splitlines()]
    local = [json.loads(line) for line in (local_out / "records.jsonl").read_text().splitlines()]
    replayed = []
    for row in rows:
        if row["details"]["judge:faithfulness"].pop("cached"):
            replayed.append(row["id"])
    for row in local:
        assert row["details"]["judge:faithfulness"].pop("cached") is False
    assert rows == local, log[-3000:]
    assert len(rows) == RECORDS
    ray_summary = json.loads((ray_out / "summary.json").read_text())
    local_summary = json.loads((local_out / "summary.json").read_text())
    assert ray_summary["metrics"] == local_summary["metrics"]
    ray_judge, local_judge = (s["manifest"].pop("judge") for s in (ray_summary, local_summary))
    assert manifest(ray_summary) == manifest(local_summary)
    account = ("cache", "requests", "usage", "cached_usage")
    assert ({k: v for k, v in ray_judge.items() if k not in account}
            == {k: v for k, v in local_judge.items() if k not in account})
    assert ray_judge["cache"]["hits"] == len(replayed)
    assert ray_judge["requests"] == ray_judge["cache"]["misses"] == RECORDS - len(replayed)
    assert local_judge["requests"] == RECORDS
    if not replayed:  # an uninterrupted run: the very account of the local run
        for judge in (ray_judge, local_judge):
            judge["cache"].pop("path")  # each run has a cache file of its own
        assert ray_judge == local_judge
    return replayed


def manifest(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary["manifest"].items() if k not in ("created", "wall_time_s")}


def asked(requests: list[Request]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in requests:
        counts[r.message] = counts.get(r.message, 0) + 1
    return counts


def message_of(requests: list[Request], ids: list[str]) -> list[str]:
    """The judge prompts of these records (a record's contexts name its number's fact)."""
    found = [r.message for r in requests if any(f"Fact {i[1:]} is that" in r.message
                                                for i in ids)]
    assert len(set(found)) == len(ids)
    return found


def judge_port(judge: WatchedJudge) -> int:
    return int(judge.base_url.rsplit(":", 1)[1].split("/")[0])


def test_three_nodes_score_as_the_local_engine(
        whole: LocalCluster, judge: WatchedJudge, data: Path, local_run: Path) -> None:
    out = data.parent / "ray"
    first = len(judge.log)
    run = score(data, judge, out, whole.environment(), "--background", *on_ray(whole))
    while len(judge.log) < first + 12 and run.poll() is None:
        time.sleep(0.02)
    # Which worker nodes are asking the judge: the connections of each node's processes.
    asking = {n.name for n in whole.workers() if whole.connections(n, judge_port(judge))}
    assert run.wait(timeout=300) == 0
    assert assert_same_run(out, local_run) == []  # nothing lost, nothing replayed
    print("worker nodes asking the judge:", sorted(asking))
    assert asking == {"worker1", "worker2"}, "the blocks were not scored on both nodes"
    assert asked(judge.log[first:]) == dict.fromkeys(asked(judge.log[first:]), 1)
    assert len(judge.log) - first == RECORDS


def test_a_lost_node_costs_only_its_requests_in_flight(
        whole: LocalCluster, judge: WatchedJudge, data: Path, local_run: Path) -> None:
    out = data.parent / "lost"
    first = len(judge.log)
    env = {**whole.environment(), "RAGEVAL_RAY_LEASE_TIMEOUT": LEASE_TIMEOUT_S}
    run = score(data, judge, out, env, "--background", *on_ray(whole))
    while len(judge.log) < first + 12 and run.poll() is None:
        time.sleep(0.02)
    judge.gate.clear()  # every reply waits from now on
    try:
        time.sleep(2 * LATENCY_S)  # replies already past the gate arrive, and are stored
        held = judge.open_now()
        ports = {n.name: whole.connections(n, judge_port(judge)) for n in whole.workers()}
        victim = max(whole.workers(), key=lambda n: sum(r.port in ports[n.name] for r in held))
        lost = {r.message for r in held if r.port in ports[victim.name]}
        whole.kill(victim)
        print(f"lost {victim.name} with {len(lost)} of {len(held)} requests in flight")
    finally:
        judge.gate.set()
    assert run.wait(timeout=300) == 0, Path(str(out) + ".log").read_text()[-3000:]
    replayed = assert_same_run(out, local_run)

    requests = judge.log[first:]
    counts = asked(requests)
    twice = {m for m, n in counts.items() if n > 1}
    # Only the requests the lost node had in flight were asked again, each once more: the
    # replies it had stored were replayed from the cache by the block's retry elsewhere.
    assert lost, "the lost node had no request in flight"
    assert twice == lost
    assert max(counts.values()) == 2
    assert len(requests) == RECORDS + len(lost)
    # What the lost node had stored came back from the cache: asked once, on the lost node.
    # (The run's account counts the blocks that came back, so those requests are not in it.)
    assert all(counts[m] == 1 for m in message_of(requests, replayed))
    assert 1 <= len(lost) <= CONCURRENCY
    # The run's limits held across the nodes, the lost node's requests included: never more
    # than the cap in flight, and starts paced (at most one per 0.1 s: 10 in a second, and one
    # more for a second that starts and ends on a start).
    survivors = [r for r in requests if r.port not in ports[victim.name]]
    assert survivors and most_at_once(survivors) <= CONCURRENCY
    assert most_at_once(requests) <= CONCURRENCY
    assert most_started_within(requests, 1.0) <= RPM / 60 + 1
