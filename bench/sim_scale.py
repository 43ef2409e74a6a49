"""Simulation (not a measurement): judge throughput of N Ray workers against a rate-limited judge.

A deterministic discrete-event model (simulated clock, heapq event queue, seeded numpy draws) of
one judge run of ``--requests`` requests on N workers, for each N in ``--workers``, under four
ways of holding the run's judge limits (concurrency C, requests per minute R):

* ``shared``: the Ray engine's: one limits actor holds ONE cap of C leases and ONE rate of R
  starts per minute, evenly spaced 60 / R s apart, granted first come first. Each worker runs
  C threads and leases every request before sending it: one actor round trip of ``--lease-ms``
  (half to ask, half for the grant). The lease is held through the SDK's retries and given
  back (fire and forget: it reaches the actor half a trip later) once the reply is written:
  at most C in flight across all N workers, and R per minute started;
* ``split``: each worker gets ``max(1, C // N)`` in flight and R / N per minute, what
  ``JudgeOptions.for_workers`` gives without shared limits: N * max(1, C // N) in all (over C
  once N > C, under C when N does not divide C), and no worker uses another's idle share;
* ``naive``: each worker gets the full C and the full R, as N independent copies would;
* ``ideal``: one process, one pool of exactly C in flight and one R bucket, no batches and no
  lease cost: the reference the ``/ ideal`` column divides by.

The model, and what it leaves out:

* endpoint: an accepted request is served after a lognormal latency (median ``--latency-ms``,
  sigma 0.3), with no queueing or slowdown under load; a token bucket of ``--server-rps`` (burst:
  one second of tokens) admits requests; one over the limit gets a 429 after 5 ms with
  ``Retry-After: 1``, and the client sleeps 1 s plus 0-50 ms of jitter, holding its slot (and
  lease), and sends again (another request). Retries never stop here: ``fail@5`` counts the
  requests that met more than 5 429s, which the SDK's default ``max_retries=5`` would have failed;
* clients: under ``split``, ``naive`` and ``ideal`` a worker's own rpm bucket (burst 1, like
  ``rageval.judge.llm.transport.pool.TokenBucket``) is waited on once per request, before its
  first try;
* lease actor: only its round trip is modelled, not its own throughput limit (one event loop
  for every worker's asks, its 5 ms poll while no lease is free, a waiter's new ask every
  0.25 s): at high request rates the real actor can only be slower than this one;
* dispatch: the requests are cut in ``--batch``-sized batches that idle workers pull; a worker
  takes its next batch once its current one is all written (one ``map_batches`` call; the
  engine's batches are 1,000 records, each maybe several requests), so a worker has at most
  min(its threads, batch) under way; the ``in flight`` column is the cap on requests in flight
  (for ``shared``, at most C); ``ideal`` streams, without batches;
* cache: each reply is written under one FIFO single-writer lock for ``--write-ms``; the slot is
  freed when its write ends. Real SQLite WAL contention between processes (busy timeouts,
  polling, checkpoints) can only be worse than this queue. Every request is a cache miss.

Printed bound: min(C / latency, server rps, R / 60, 1000 / write_ms), which ``ideal`` approaches.

    python bench/sim_scale.py [--workers 10,20,50,100] [--concurrency 16] [--rpm R] [--json PATH]
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

POLICIES = ("shared", "split", "naive", "ideal")
SIGMA = 0.3  # lognormal sigma of the service latency
REJECT_S = 0.005  # a 429 comes back after 5 ms ...
RETRY_AFTER_S = 1.0  # ... saying Retry-After: 1
JITTER_S = 0.05  # uniform client jitter on top of each Retry-After wait
GIVE_UP = 5  # the SDK's default max_retries
ARRIVE, REPLY, DONE, ASK, RELEASE = range(5)


@dataclass(frozen=True)
class Params:
    requests: int
    concurrency: int  # C
    rpm: float | None  # R
    latency_ms: float
    server_rps: float
    write_ms: float
    batch: int
    seed: int
    lease_ms: float


class Bucket:
    """A token bucket filled at ``rate`` per second up to ``capacity``, full at time 0."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate, self.capacity = rate, capacity
        self.tokens, self.stamp = capacity, 0.0

    def _refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, now: float) -> bool:
        """Server side: spend a token if there is one (False: a 429)."""
        self._refill(now)
        ok = self.tokens >= 1.0
        self.tokens -= ok
        return ok

    def reserve(self, now: float) -> float:
        """Client side: book the next token; the wait until it is there (first come first)."""
        self._refill(now)
        self.tokens -= 1.0
        return max(0.0, -self.tokens / self.rate)


@dataclass
class Pool:
    """One worker's client: ``slots`` in flight at most, an optional rpm bucket, its batch."""

    slots: int
    limiter: Bucket | None
    todo: int = 0  # requests of the current batch not yet started
    busy: int = 0  # requests started and not yet written


class Sim:
    """One run: the workers' pools, the endpoint's bucket, the cache lock, the event queue."""

    def __init__(self, p: Params, pools: list[Pool], batch: int, shared: bool) -> None:
        self.pools, self.batch, self.left, self.shared = pools, batch, p.requests, shared
        # The limits actor (``shared``): free leases, next start, waiting asks, half a round trip.
        self.free, self.next_start, self.asks = p.concurrency, 0.0, deque[int]()
        self.interval, self.half_trip = 60.0 / p.rpm if p.rpm else 0.0, p.lease_ms / 2000
        self.server = Bucket(p.server_rps, p.server_rps)
        self.write_s = p.write_ms / 1000
        draws = np.random.default_rng(p.seed).lognormal(0.0, SIGMA, p.requests)
        self.latency = (p.latency_ms / 1000 * draws).tolist()
        self.jitter_rng = np.random.default_rng(p.seed + 1)
        self.jitter: list[float] = []
        self.events: list[tuple[float, int, int, int, int]] = []
        self.seq = self.sent = self.replies = self.rejects = self.gave_up = 0
        self.lock_free = self.clock = 0.0

    def push(self, t: float, kind: int, pool: int, tries: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, pool, tries))

    def next_jitter(self) -> float:
        if not self.jitter:
            self.jitter = self.jitter_rng.uniform(0.0, JITTER_S, 8192).tolist()
        return self.jitter.pop()

    def fill(self, i: int, now: float) -> None:
        """Start what worker ``i`` may start; pull its next batch when its last one is done."""
        pool = self.pools[i]
        if pool.todo == 0 and pool.busy == 0 and self.left:
            pool.todo = min(self.batch, self.left)
            self.left -= pool.todo
        while pool.todo and pool.busy < pool.slots:
            pool.todo -= 1
            pool.busy += 1
            if self.shared:
                self.push(now + self.half_trip, ASK, i)
            else:
                wait = pool.limiter.reserve(now) if pool.limiter else 0.0
                self.push(now + wait, ARRIVE, i)

    def ask(self, now: float, i: int, tries: int) -> None:
        self.asks.append(i)
        self.grant(now)

    def release(self, now: float, i: int, tries: int) -> None:
        self.free += 1
        self.grant(now)

    def grant(self, now: float) -> None:
        """The actor's rule: a lease to each waiting ask, in order, while one is free, no two
        starts closer than 60 / R; the grant reaches the worker, which then sends."""
        while self.asks and self.free:
            self.free -= 1
            at = max(now, self.next_start)
            self.next_start = max(self.next_start + self.interval, at)
            self.push(at + self.half_trip, ARRIVE, self.asks.popleft())

    def arrive(self, now: float, i: int, tries: int) -> None:
        if self.server.take(now):
            self.push(now + self.latency[self.sent], REPLY, i, tries)
            self.sent += 1
        else:
            self.rejects += 1
            retry = now + REJECT_S + RETRY_AFTER_S + self.next_jitter()
            self.push(retry, ARRIVE, i, tries + 1)

    def reply(self, now: float, i: int, tries: int) -> None:
        self.lock_free = max(now, self.lock_free) + self.write_s
        self.gave_up += tries > GIVE_UP
        self.push(self.lock_free, DONE, i)

    def done(self, now: float, i: int, tries: int) -> None:
        self.replies += 1
        self.clock = now
        self.pools[i].busy -= 1
        if self.shared:
            self.push(now + self.half_trip, RELEASE, i)
        self.fill(i, now)

    def run(self) -> float:
        handlers = (self.arrive, self.reply, self.done, self.ask, self.release)  # by kind
        for i in range(len(self.pools)):
            self.fill(i, 0.0)
        while self.events:
            now, _, kind, i, tries = heapq.heappop(self.events)
            handlers[kind](now, i, tries)
        return self.clock


def limiter(rpm: float | None) -> Bucket | None:
    return Bucket(rpm / 60.0, 1.0) if rpm else None


def make_pools(policy: str, n: int, p: Params) -> tuple[list[Pool], int]:
    """The workers' clients under ``policy``, and the batch size they pull."""
    c, r = p.concurrency, p.rpm
    if policy == "ideal":
        return [Pool(c, limiter(r))], p.requests
    if policy == "shared":
        return [Pool(c, None) for _ in range(n)], p.batch
    if policy == "split":
        return [Pool(max(1, c // n), limiter(r and r / n)) for _ in range(n)], p.batch
    return [Pool(c, limiter(r)) for _ in range(n)], p.batch


def simulate(policy: str, n: int, p: Params) -> dict[str, float | int | str]:
    pools, batch = make_pools(policy, n, p)
    shared = policy == "shared"
    sim = Sim(p, pools, batch, shared)
    wall, cap = sim.run(), sum(min(q.slots, batch) for q in pools)
    cap = min(cap, p.concurrency) if shared else cap
    return {"policy": policy, "workers": n, "in_flight_cap": cap, "wall_s": wall,
            "throughput": sim.replies / wall, "rejects_429": sim.rejects,
            "gave_up_at_5": sim.gave_up, "lock_busy": sim.replies * sim.write_s / wall}


def bounds(p: Params) -> dict[str, float]:
    return {"C/latency": p.concurrency / (p.latency_ms / 1000), "server_rps": p.server_rps,
            "R/60": p.rpm / 60 if p.rpm else math.inf, "1000/write_ms": 1000 / p.write_ms}


def print_bound(p: Params, terms: dict[str, float]) -> None:
    parts = ", ".join(f"{k} {v:.1f}" for k, v in terms.items())
    print(f"bound: min({parts}) = {min(terms.values()):.1f} replies/s")
    cycle = p.latency_ms / 1000 * math.exp(SIGMA**2 / 2) + p.write_ms / 1000
    print(f"(per slot: mean latency + one write = {cycle * 1000:.1f} ms, "
          f"so C slots give at most {p.concurrency / cycle:.1f}/s)")


def print_table(policy: str, rows: list[dict]) -> None:
    print(f"\npolicy: {policy}")
    print(f"{'workers':>7} {'in flight':>9} {'wall s':>8} {'replies/s':>9} {'429s':>8} "
          f"{'fail@5':>6} {'lock busy':>9} {'/ ideal':>7}")
    for r in rows:
        print(f"{r['workers']:>7} {r['in_flight_cap']:>9} {r['wall_s']:>8.1f} "
              f"{r['throughput']:>9.1f} {r['rejects_429']:>8} {r['gave_up_at_5']:>6} "
              f"{r['lock_busy']:>9.1%} {r['vs_ideal']:>7.2f}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="10,20,50,100", help="comma-separated N values")
    ap.add_argument("--policies", default=",".join(POLICIES), help="of " + ",".join(POLICIES))
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, default=16, help="the run's judge cap C")
    ap.add_argument("--rpm", type=float, default=None, help="the run's requests per minute R")
    ap.add_argument("--latency-ms", type=float, default=100.0, help="median service latency")
    ap.add_argument("--server-rps", type=float, default=200.0, help="endpoint rate limit")
    ap.add_argument("--write-ms", type=float, default=2.0, help="one cache write")
    ap.add_argument("--batch", type=int, default=100, help="requests per worker batch")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lease-ms", type=float, default=1.0, help="one lease actor round trip")
    ap.add_argument("--json", type=Path, default=None, help="write all numbers here")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    policies = [q for q in args.policies.split(",") if q]
    if unknown := set(policies) - set(POLICIES):
        raise SystemExit(f"unknown policies: {sorted(unknown)}")
    p = Params(args.requests, args.concurrency, args.rpm, args.latency_ms, args.server_rps,
               args.write_ms, args.batch, args.seed, args.lease_ms)
    terms = bounds(p)
    print(f"simulated run: {p.requests} requests, C={p.concurrency}, R={p.rpm}, "
          f"latency {p.latency_ms} ms, server {p.server_rps}/s, write {p.write_ms} ms, "
          f"batch {p.batch}, lease {p.lease_ms} ms, seed {p.seed}")
    print_bound(p, terms)
    ideal = simulate("ideal", 1, p)  # one pool: the same at every N
    tables = {}
    for policy in policies:
        rows = [dict(ideal, workers=n) if policy == "ideal" else simulate(policy, n, p)
                for n in workers]
        for r in rows:
            r["vs_ideal"] = r["throughput"] / ideal["throughput"]
        tables[policy] = rows
        print_table(policy, rows)
    if args.json:
        finite = {k: (v if math.isfinite(v) else None) for k, v in terms.items()}
        out = {"params": vars(p), "bound_terms": finite, "bound": min(terms.values()),
               "tables": tables}
        args.json.write_text(json.dumps(out, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
