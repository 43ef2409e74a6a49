"""The Ray engine on a real local Ray cluster (``ray.init(num_cpus=2)``): the local engine's
values, summaries and signatures, number for number, on every metric family; the judge through
the loopback server, faults included, asking each reply once; offline replay from the cache the
workers filled."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_server import JudgeServer
from test_streaming import comparable

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import UsageError
from rageval.core.metric import ScoreOptions
from rageval.core.records import load_records
from rageval.core.registry import create
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.rubric.metric import JudgeMetric
from rageval.judge.rubric.render import render

ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra")

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"
LEXICAL = ["ndcg@3", "map", "mrr", "p@2", "rouge1", "rougeL", "bleu"]
KEY = "sk-ray-test-0123456789"
ENV = "RAGEVAL_TEST_RAY_KEY"


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("ci", ["records", "poisson"])
def test_demo_matches_the_local_engine(ci: str) -> None:
    """Also the summary in running sums (Poisson weights), to the last bit."""
    local = evaluate(DEMO, LEXICAL, bootstrap=100, seed=2, ci=ci)
    on_ray = evaluate(DEMO, LEXICAL, bootstrap=100, seed=2, engine="ray", ray_workers=2,
                      batch_size=3, ci=ci)
    assert comparable(on_ray) == comparable(local)
    assert {item.ci_method for item in on_ray.summary.values()} == {ci}


def test_conversations_match_the_local_engine(tmp_path: Path) -> None:
    conversations = DEMO.with_name("conversations.jsonl")
    metrics = [*LEXICAL, "tools:f1"]
    for ci in ("records", "poisson"):
        local = evaluate(conversations, metrics, bootstrap=100, seed=2, ci=ci,
                         out=tmp_path / f"local-{ci}", turn_thresholds={"rouge1": 0.5})
        on_ray = evaluate(conversations, metrics, bootstrap=100, seed=2, engine="ray", ci=ci,
                          ray_workers=2, batch_size=2, out=tmp_path / f"ray-{ci}",
                          turn_thresholds={"rouge1": 0.5})
        assert comparable(on_ray) == comparable(local)
        assert on_ray.conversations() == local.conversations() != []


def write_records(path: Path, count: int) -> Path:
    lines = []
    for i in range(count):
        docs = [f"d{i}-{r}" for r in range(3)]
        lines.append(json.dumps({
            "id": f"q{i}",
            "query": f"What is fact number {i}?",
            "contexts": [{"id": d, "text": f"Fact {i} is that the sky is blue, part {r}."}
                         for r, d in enumerate(docs)],
            "answer": f"Fact {i}: the sky is blue." + " Indeed." * (i % 3),
            "reference": f"The sky is blue ({i}).",
            "judgments": {docs[i % 3]: 1 + i % 2},
        }))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def judge_options(server: JudgeServer, cache: Path, **kw: Any) -> JudgeOptions:
    return JudgeOptions(model="judge-model", cache=str(cache), api_key_env=ENV,
                        base_url=server.base_url, timeout=5.0, max_retries=1, **kw)


def faulty_server(records_path: Path, runs: int) -> JudgeServer:
    """A loopback judge that answers one record's request in prose and fails another's once
    (then answers), in each of ``runs`` runs: per message, so the same records fail whichever
    engine asks."""
    server = JudgeServer(expected_key=KEY)
    metric = create("judge:faithfulness", ScoreOptions(judge=JudgeOptions(model="judge-model")))
    assert isinstance(metric, JudgeMetric)
    records = load_records(records_path)
    server.fail_for(render(metric.rubric, records[1])[-1]["content"], *["prose"] * runs)
    server.fail_for(render(metric.rubric, records[2])[-1]["content"], *["500", None] * runs)
    return server


EVERY_FAMILY = ["ndcg@3", "map", "rouge2", "bleu", "bertscore", "judge:faithfulness"]


def test_every_family_matches_with_the_judge_asked_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = write_records(tmp_path / "r.jsonl", 9)
    runs: dict[str, Any] = {}
    with faulty_server(path, runs=2) as server:  # one endpoint: the details name it
        for engine in ("local", "ray"):
            before = server.requests
            judge = judge_options(server, tmp_path / f"{engine}.sqlite")
            extra = {"engine": "ray", "ray_workers": 2} if engine == "ray" else {}
            runs[engine] = evaluate(path, EVERY_FAMILY, judge=judge, bootstrap=50,
                                    batch_size=2, window=4, embedding_cache="none", **extra)
            runs[engine + "_requests"] = server.requests - before
    local_rows, local_summary, local_manifest = comparable(runs["local"])
    rows, summary, manifest = comparable(runs["ray"])
    assert rows == local_rows
    assert summary == local_summary
    for section in (manifest, local_manifest):  # each run had a cache file of its own
        section["judge"]["cache"].pop("path")
    assert manifest == local_manifest  # the judge's account merged from the workers
    assert runs["ray_requests"] == runs["local_requests"] == 9 + 1  # one 500, retried
    assert runs["ray"].summary["judge:faithfulness"].n == 8  # the prose reply is unscored

    replay = JudgeOptions(model="judge-model", cache=str(tmp_path / "ray.sqlite"),
                          offline=True)
    again = evaluate(path, EVERY_FAMILY, judge=replay, bootstrap=50, batch_size=2,
                     engine="ray", ray_workers=2, embedding_cache="none")
    assert ([r["scores"] for r in comparable(again)[0]]
            == [r["scores"] for r in local_rows])


def test_idf_counts_travel_to_the_workers(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """BERTScore's idf from the run's pass over its references, not a block's: the local
    engine's numbers, streamed, and the run's read as one window."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = write_records(tmp_path / "r.jsonl", 9)
    metrics = ["bertscore(idf=true)", "rouge1"]
    kw: dict[str, Any] = {"bootstrap": 50, "batch_size": 2, "embedding_cache": "none"}
    local = evaluate(path, metrics, window=4, **kw)
    on_ray = evaluate(path, metrics, window=4, engine="ray", ray_workers=2, **kw)
    assert comparable(on_ray) == comparable(local)
    whole = evaluate(load_records(path), metrics, **kw)  # the same batches, in one window
    assert ([r["scores"] for r in comparable(whole)[0]]
            == [r["scores"] for r in comparable(local)[0]])


def test_claim_level_metrics_match_the_local_engine(tmp_path: Path) -> None:
    """Each block's claim analyses made on its worker, their account and replies per record
    summed with the run's (records that share no text: see test_window_by_window)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judge" / "claims"))
    from test_claim_metrics import ALL, RECORDS, judge
    from test_claim_metrics import write_records as write_claim_records

    path = write_claim_records(tmp_path / "r.jsonl", RECORDS)
    runs: dict[str, Any] = {}
    with JudgeServer() as server:
        for engine in ("local", "ray"):
            extra = {"engine": "ray", "ray_workers": 2} if engine == "ray" else {}
            runs[engine] = comparable(evaluate(
                path, ALL, judge=judge(server, tmp_path / f"{engine}.sqlite"), bootstrap=30,
                window=3, batch_size=1, **extra))
    for _, _, manifest in runs.values():
        manifest["claims"]["cache"].pop("path")
    assert runs["ray"] == runs["local"]
    assert server.requests == 2 * runs["local"][2]["claims"]["requests"]


def test_cli_engine_ray(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["score", str(DEMO), "-m", "map", "-m", "rouge1", "--no-progress", "--bootstrap",
            "50"]
    assert main([*argv, "--out", str(tmp_path / "local")]) == 0
    assert main([*argv, "--out", str(tmp_path / "ray"), "--engine", "ray",
                 "--ray-workers", "2"]) == 0
    capsys.readouterr()
    assert ((tmp_path / "local" / "records.jsonl").read_bytes()
            == (tmp_path / "ray" / "records.jsonl").read_bytes())


def test_bad_engine_settings_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown engine"):
        evaluate(DEMO, ["map"], engine="spark")
    with pytest.raises(UsageError, match="go with engine='ray'"):
        evaluate(DEMO, ["map"], ray_workers=2)
    with pytest.raises(UsageError, match="at least 1 worker"):
        evaluate(DEMO, ["map"], engine="ray", ray_workers=0)


def _scorer_pids() -> list[int]:
    """The processes of the Ray actors scoring blocks (by their command line, as ps shows)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"_BlockScorer" in command and b"MapWorker" in command:
            pids.append(int(entry.name))
    return pids


def test_a_worker_killed_mid_run_is_retried_without_asking_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    path = write_records(tmp_path / "r.jsonl", 24)
    metrics = ["map", "judge:faithfulness"]
    local = evaluate(path, ["map"], bootstrap=50)
    killed: list[int] = []
    with JudgeServer(expected_key=KEY, latency_s=0.3) as server:
        judge = judge_options(server, tmp_path / "ray.sqlite", concurrency=4)

        def kill_one_worker() -> None:
            deadline = time.monotonic() + 60
            while server.requests < 6 and time.monotonic() < deadline:
                time.sleep(0.02)
            victims = _scorer_pids()
            if victims:
                killed.append(victims[0])
                os.kill(victims[0], signal.SIGKILL)  # no chance to finish anything

        killer = threading.Thread(target=kill_one_worker)
        killer.start()
        on_ray = evaluate(path, metrics, judge=judge, bootstrap=50, batch_size=2,
                          engine="ray", ray_workers=2)
        killer.join()
        asked = server.requests
    assert killed, "no scorer process was found to kill"
    # Every record scored, and beyond the 24 replies only those in flight on the dead worker
    # can have been asked twice: at most the run's concurrency cap (4) were in flight at all.
    assert on_ray.summary["judge:faithfulness"].n == 24
    assert 24 <= asked <= 24 + 4
    held = evaluate(load_records(path), metrics, bootstrap=50, judge=JudgeOptions(
        model="judge-model", cache=str(tmp_path / "ray.sqlite"), offline=True))
    assert [r.scores for r in on_ray.records] == [r.scores for r in held.records]
    assert on_ray.summary["map"] == local.summary["map"]
    assert (on_ray.summary["judge:faithfulness"].to_json()
            == held.summary["judge:faithfulness"].to_json())


def test_the_limits_actor_caps_leases_and_spaces_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval.engine import ray_engine
    from rageval.engine.ray_engine import _Limits

    async def scenario() -> None:
        limits = _Limits(concurrency=2, rpm=None)
        first, second = await limits.acquire(0.1, "a"), await limits.acquire(0.1, "a")
        assert first is not None and second is not None
        assert await limits.acquire(0.05, "b") is None  # both leases out
        limits.release(first)
        assert await limits.acquire(0.1, "b") is not None
        paced = _Limits(concurrency=10, rpm=600.0)  # one start per 0.1 s, no burst
        start = time.monotonic()
        for _ in range(3):
            assert await paced.acquire(1.0, "a") is not None
        assert time.monotonic() - start >= 0.19
        monkeypatch.setattr(ray_engine, "_STALE_S", 0.2)
        dead = _Limits(concurrency=1, rpm=None)
        assert await dead.acquire(0.1, "gone") is not None  # then its holder stops renewing
        assert await dead.acquire(1.0, "alive") is not None  # taken back once it is stale
        held = _Limits(concurrency=1, rpm=None)
        assert await held.acquire(0.1, "busy") is not None
        for _ in range(5):  # a live holder renews: its lease stays its own
            await asyncio.sleep(0.1)
            held.renew("busy")
            assert await held.acquire(0.01, "other") is None

    import asyncio

    asyncio.run(scenario())


def test_every_request_takes_a_lease_from_the_shared_limits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the judge's own pool: leases are taken and given back, never more out than
    the cap, with the worker's threads free to wait."""
    monkeypatch.setenv(ENV, KEY)

    class Counting:
        def __init__(self, cap: int) -> None:
            self.cap, self.out, self.most, self.taken = cap, 0, 0, 0
            self.lock = threading.Lock()

        def acquire(self, timeout: float) -> object | None:
            with self.lock:
                if self.out >= self.cap:
                    time.sleep(min(timeout, 0.01))
                    return None
                self.out += 1
                self.taken += 1
                self.most = max(self.most, self.out)
                return self.taken

        def release(self, lease: object) -> None:
            with self.lock:
                self.out -= 1

    class LocalSharing:
        """What an engine shares, here in this process."""

        def __init__(self, limits: Counting) -> None:
            self._limits = limits

        def limits(self, concurrency: int, rpm: float | None) -> Counting:
            return self._limits

        def service(self, key: object, build: Any, *args: Any) -> Any:
            return build(*args)

    shared = Counting(cap=2)
    path = write_records(tmp_path / "r.jsonl", 8)
    with JudgeServer(expected_key=KEY, latency_s=0.05) as server:
        judge = judge_options(server, tmp_path / "c.sqlite", concurrency=8)
        judge = judge.for_workers(4, LocalSharing(shared))
        results = evaluate(path, ["judge:faithfulness"], judge=judge, bootstrap=10)
    assert results.summary["judge:faithfulness"].n == 8
    assert shared.taken == 8 and shared.out == 0
    assert shared.most <= 2


def test_secrets_never_travel_in_the_runtime_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval.core.workers import worker_environment

    monkeypatch.setenv("MY_JUDGE_AUTH", "sk-live-123")  # the key, under a name saying nothing
    monkeypatch.setenv("HF_TOKEN", "hf-secret")
    monkeypatch.setenv("RAGEVAL_EMBEDDING_CACHE", "/shared/emb")
    options = ScoreOptions(judge=JudgeOptions(model="m", api_key_env="MY_JUDGE_AUTH"))
    plain, secret = worker_environment(options)
    assert secret == {"MY_JUDGE_AUTH": "sk-live-123", "HF_TOKEN": "hf-secret"}
    assert plain["RAGEVAL_EMBEDDING_CACHE"] == "/shared/emb"
    assert not set(plain) & set(secret)


def test_an_address_beside_an_open_connection_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="already connected to a Ray cluster"):
        evaluate(DEMO, ["map"], engine="ray", ray_address="auto")


def test_the_lease_timeout_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval.engine.ray_engine import LEASE_TIMEOUT_ENV, RayEngine, lease_timeout

    monkeypatch.delenv(LEASE_TIMEOUT_ENV, raising=False)
    assert lease_timeout() == 30.0
    monkeypatch.setenv(LEASE_TIMEOUT_ENV, "4.5")
    with RayEngine(workers=1) as engine:
        limits = engine.limits(3, None)
        assert limits.beat == 0.75  # renewed six times per timeout
        assert ray.get(limits.actor.__ray_call__.remote(lambda actor: actor.stale)) == 4.5
        # The limits live where the driver is, as the reply cache does: a worker node lost
        # does not take them along.
        node = ray.get(limits.actor.__ray_call__.remote(
            lambda actor: ray.get_runtime_context().get_node_id()))
        assert node == ray.get_runtime_context().get_node_id()
    for bad in ("0.5", "soon", "inf", "nan"):
        monkeypatch.setenv(LEASE_TIMEOUT_ENV, bad)
        with pytest.raises(UsageError, match=LEASE_TIMEOUT_ENV):
            RayEngine()
