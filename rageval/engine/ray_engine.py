"""The Ray engine (``--engine ray``): a window's batches scored on a Ray cluster.

Each window becomes a Ray Data dataset of record blocks (one block per batch) mapped with
``map_batches`` onto a pool of actors: an actor builds the run's metrics once and keeps what
they load (a BERTScore model) for every block it scores, and asks for a GPU when the cluster
has them and a metric can use one. Blocks come back in order, so the per-record results are
written, and the summary built, exactly as the local engine does: the same
:func:`~rageval.engine.local.score_apart` prepares (the run hooks) and scores each block, with
the results of the run's passes (BERTScore's idf counts) shipped beside the metrics, and values,
summaries and signatures are the local engine's, number for number.

The workers get the caller's settings that scoring reads from the environment (rageval's and
the model hubs': a cluster's workers do not inherit the caller's environment) through Ray's
runtime environment; secrets among them (the judge's API key, tokens) travel with the actors'
arguments instead, since Ray logs runtime environments. Limits that hold for the whole
run hold across the cluster: one small actor holds the judge's concurrency cap and request
rate, and every request of every worker takes a lease from it first (a worker renews its
leases every few seconds; those of one that died are taken back half a minute later, or
after :data:`LEASE_TIMEOUT_ENV` seconds; see :func:`~rageval.core.workers.options_for_workers`).
That actor, like the cache's, lives on the caller's machine, so that no worker node's loss
takes it along. The run's reply cache
stays on the caller's machine: one service actor there holds it open, and every worker reads
and stores replies through it, each reply stored as it arrives, so a reply stored once is never
asked for again and a block that Ray retries after its actor died replays from the cache what
the dead actor had stored. What each block counted (requests, cache hits, tokens) comes back
with it and is added to the run's account.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from rageval.core.errors import MissingDependencyError, UsageError
from rageval.core.metric import Batch, Metric
from rageval.core.workers import options_for_workers, worker_environment
from rageval.engine.local import LocalEngine, ScoredBatch, score_apart

# The metric libraries that can use a GPU: an actor asks for one when the cluster has any
# and a metric of the run names one of them.
_GPU_LIBRARIES = ("torch",)


class RayEngine:
    """Scores each window's batches on Ray (``address``: an existing cluster, ``"auto"`` for
    the one this machine belongs to; None: a local one started for the run and stopped after
    it). ``workers``: actors per window (default: the cluster's CPUs, at most 8)."""

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        if workers is not None and (isinstance(workers, bool) or workers < 1):
            raise UsageError(f"the Ray engine needs at least 1 worker, got {workers!r}")
        self.address = address
        self.workers = workers
        self.lease_s = lease_timeout()  # a bad setting stops the run before it starts
        self._started = False
        self._shared: dict[Hashable, RayLimits | ServiceProxy] = {}  # what workers share

    def __enter__(self) -> RayEngine:
        ray = _ray()
        if ray.is_initialized():
            if self.address is not None:
                raise UsageError("this process is already connected to a Ray cluster: leave "
                                 "ray_address out to use it, or disconnect first")
        else:
            ray.init(address=self.address, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
            self._started = True
        if ray.util.client.ray.is_connected():
            self.__exit__()
            raise UsageError("a Ray Client connection (ray://) is not supported: the run's "
                             "files and judge cache must be on a machine of the cluster; run "
                             "rageval there with --ray-address auto")
        context = ray.data.DataContext.get_current()
        self._restore = (context.execution_options.preserve_order,
                         context.enable_progress_bars,
                         logging.getLogger("ray.data").level)
        context.execution_options.preserve_order = True  # blocks come back in input order
        context.enable_progress_bars = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # no plan and timing lines
        return self

    def __exit__(self, *exc: object) -> None:
        ray = _ray()
        try:
            for shared in self._shared.values():
                with contextlib.suppress(Exception):  # each is stopped, whatever the others do
                    if isinstance(shared, ServiceProxy):  # a store closes cleanly
                        ray.get(shared.actor.close.remote(), timeout=_CLOSE_S)
                    ray.kill(shared.actor)
            self._shared.clear()
            restore = getattr(self, "_restore", None)
            if restore is not None:
                context = ray.data.DataContext.get_current()
                context.execution_options.preserve_order = restore[0]
                context.enable_progress_bars = restore[1]
                logging.getLogger("ray.data").setLevel(restore[2])
        finally:
            if self._started:
                ray.shutdown()
                self._started = False

    def limits(self, concurrency: int, rpm: float | None) -> RayLimits:
        """One limits actor per distinct (concurrency, rpm) of the run, shared by every
        worker of every window (:class:`~rageval.core.workers.Sharing`)."""
        key = ("limits", concurrency, rpm)
        if key not in self._shared:
            # On this machine, as the cache is: the limits must outlive any worker node
            # (leases and pacing start again from nothing in a restarted actor, so it is not
            # restarted), and a run does not outlive this machine anyway.
            stale = self.lease_s
            actor = _ray().remote(_Limits).options(max_concurrency=_WAITERS, num_cpus=0,
                                                   scheduling_strategy=self._here())
            self._shared[key] = RayLimits(actor.remote(concurrency, rpm, stale),
                                          beat=min(_BEAT_S, stale / 6))
        return self._shared[key]

    @staticmethod
    def _here() -> Any:
        """A scheduling strategy: on this machine's node, and nowhere else."""
        ray = _ray()
        return ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
            node_id=ray.get_runtime_context().get_node_id(), soft=False)

    def service(self, key: Hashable, build: Callable[..., Any], *args: Any) -> ServiceProxy:
        """``build(*args)`` in an actor on this machine (files it opens are this machine's),
        its methods called by every worker in turn (:class:`~rageval.core.workers.Sharing`)."""
        key = ("service", key)
        if key not in self._shared:
            # No CPU asked: a head node that offers none (as KubeRay's often do) takes it.
            actor = _ray().remote(_Service).options(scheduling_strategy=self._here(),
                                                    num_cpus=0, max_restarts=-1,
                                                    max_task_retries=-1)
            self._shared[key] = ServiceProxy(actor.remote(build, *args))
        return self._shared[key]

    def pool_size(self) -> int:
        if self.workers is not None:
            return self.workers
        cpus = int(_ray().cluster_resources().get("CPU", 1))
        return max(1, min(8, cpus))

    def score(self, metrics: list[Metric], run: Batch,
              batch_size: int) -> Iterator[ScoredBatch]:
        if not all(m.streams() for m in metrics):
            # A metric that reads the whole run at once is scored where the run is: here.
            yield from LocalEngine().score(metrics, run, batch_size)
            return
        ray = _ray()
        records = list(run.records)
        blocks = [{"block": pickle.dumps(records[start : start + batch_size])}
                  for start in range(0, len(records), batch_size)]
        size = min(self.pool_size(), len(blocks))
        portable = [m.with_options(options_for_workers(m.options, size, self))
                    for m in metrics]
        gpus = _gpus_per_actor(ray, portable)
        env: dict[str, str] = {}
        secrets: dict[str, str] = {}  # sent with the actors' arguments: Ray logs runtime envs
        for metric in metrics:
            plain, secret = worker_environment(metric.options)
            env.update(plain)
            secrets.update(secret)
        dataset = ray.data.from_items(blocks, override_num_blocks=len(blocks))
        scored = dataset.map_batches(
            _BlockScorer, fn_constructor_args=(pickle.dumps(portable), secrets,
                                               pickle.dumps(dict(run.passes))), batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=size), num_gpus=gpus,
            runtime_env={"env_vars": env},
        )
        for row in scored.iter_rows():
            yield pickle.loads(row["scored"])


class _BlockScorer:
    """A Ray actor: the run's metrics, built once, scoring one block of records at a time."""

    def __init__(self, metrics: bytes, secrets: dict[str, str], passes: bytes) -> None:
        os.environ.update(secrets)  # the judge's API key, read where a request is made
        self.metrics: list[Metric] = pickle.loads(metrics)
        # The run's passes (BERTScore's idf counts): a block is scored with the run's.
        self.passes: dict[Any, Any] = pickle.loads(passes)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[bytes]]:
        out = []
        for block in batch["block"]:
            records = pickle.loads(block)
            out.append(pickle.dumps(score_apart(self.metrics, records, self.passes)))
        return {"scored": out}


class RayLimits:
    """The limits a run's workers share, held by one Ray actor (see :class:`_Limits`). Each
    worker process that takes a lease renews its leases every :data:`_BEAT_S` seconds from a
    thread of its own, so those of a worker that died are taken back soon after."""

    def __init__(self, actor: Any, beat: float = 0.0) -> None:
        self.actor = actor
        self.beat = beat or _BEAT_S
        self._holder: str | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # A copy in another process holds leases of its own.
        return {"actor": self.actor, "beat": self.beat}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["actor"], state.get("beat", 0.0))  # type: ignore[misc]

    def acquire(self, timeout: float) -> object | None:
        return _ray().get(self.actor.acquire.remote(timeout, self._beating()))

    def release(self, lease: object) -> None:
        self.actor.release.remote(lease)

    def _beating(self) -> str:
        with self._lock:
            if self._holder is None:
                self._holder = uuid.uuid4().hex
                threading.Thread(target=self._beat, args=(self._holder,), daemon=True,
                                 name="rageval-lease-renewal").start()
            return self._holder

    def _beat(self, holder: str) -> None:
        while True:
            self.actor.renew.remote(holder)
            time.sleep(self.beat)


class ServiceProxy:
    """A worker's handle on a service: each method call runs in the service's actor."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name == "actor":  # not a service method
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return _ray().get(self.actor.call.remote(name, args, kwargs))

        return call


class _Service:
    """A Ray actor holding one object (a store every worker uses), calls served in turn."""

    def __init__(self, build: Callable[..., Any], *args: Any) -> None:
        self.target = build(*args)

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return getattr(self.target, method)(*args, **kwargs)

    def close(self) -> None:
        close = getattr(self.target, "close", None)
        if close is not None:
            close()


class _Limits:
    """A Ray actor (async): at most ``concurrency`` leases out at once, and at most ``rpm``
    granted per minute, evenly spaced. A holder (a worker process) that has not renewed its
    leases for ``stale`` seconds (:func:`lease_timeout`) died: its leases are taken back."""

    def __init__(self, concurrency: int, rpm: float | None, stale: float = 0.0) -> None:
        self.stale = stale or _STALE_S
        self.free = concurrency
        self.interval = 0.0 if rpm is None else 60.0 / rpm
        self.next_start = time.monotonic()
        self.leases: dict[int, str] = {}  # lease -> holder
        self.seen: dict[str, float] = {}  # holder -> when it last renewed or asked
        self.serial = 0

    async def acquire(self, timeout: float, holder: str) -> int | None:
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            self.seen[holder] = now
            self._reclaim(now)
            if self.free > 0 and now >= self.next_start:
                self.free -= 1
                self.next_start = max(self.next_start, now) + self.interval  # no burst
                self.serial += 1
                self.leases[self.serial] = holder
                return self.serial
            if now >= deadline:
                return None
            wait = self.next_start - now if self.free > 0 else _POLL_S
            await asyncio.sleep(max(0.0, min(wait, _POLL_S, deadline - now)))

    def renew(self, holder: str) -> None:
        self.seen[holder] = time.monotonic()

    def release(self, lease: int) -> None:
        if self.leases.pop(lease, None) is not None:
            self.free += 1

    def _reclaim(self, now: float) -> None:
        dead = {h for h, seen in self.seen.items() if now - seen > self.stale}
        if not dead:
            return
        for lease, holder in list(self.leases.items()):
            if holder in dead:
                self.release(lease)
        for holder in dead:
            del self.seen[holder]


# Workers waiting on the limits at once (threads of every actor), and how often they look.
_WAITERS = 10_000
_POLL_S = 0.005
# How often a worker renews its leases, and after how long without a renewal it is dead.
_BEAT_S = 5.0
_STALE_S = 30.0
# How long a store may take to close at the end of a run.
_CLOSE_S = 60.0
#: The setting (seconds) after which a worker that stopped renewing its leases is taken for
#: dead and its leases are taken back (default :data:`_STALE_S`). Lower, the leases of a lost
#: node come back sooner; it must stay well above the renewal interval (a sixth of it, at
#: most :data:`_BEAT_S`) and the pauses a busy worker can have.
LEASE_TIMEOUT_ENV = "RAGEVAL_RAY_LEASE_TIMEOUT"
_MIN_STALE_S = 1.0


def lease_timeout() -> float:
    """The lease timeout of this run: :data:`LEASE_TIMEOUT_ENV`, else :data:`_STALE_S`."""
    raw = os.environ.get(LEASE_TIMEOUT_ENV, "").strip()
    if not raw:
        return _STALE_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= _MIN_STALE_S or value == float("inf"):
        raise UsageError(f"{LEASE_TIMEOUT_ENV}={raw!r}: expected a number of seconds, at "
                         f"least {_MIN_STALE_S:g}")
    return value


def _gpus_per_actor(ray: Any, metrics: list[Metric]) -> float:
    wants = any(lib in m.libraries for m in metrics for lib in _GPU_LIBRARIES)
    if not wants or not ray.cluster_resources().get("GPU"):
        return 0
    return 1


def _ray() -> Any:
    try:
        import ray
        import ray.data  # the engine runs on Ray Data
        import ray.util.client  # a Ray Client connection is refused
        import ray.util.scheduling_strategies  # a shared store lives on this machine
    except ImportError:
        raise MissingDependencyError("ray[data]", "ray") from None
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    return ray
