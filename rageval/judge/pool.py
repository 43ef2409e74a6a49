"""Sending many judge requests at once: a bounded pool of workers, a rate limit, and the rules
that stop a run.

:func:`run_pool` hands each request to ``send`` (one request, start to end, in a worker thread)
with at most ``concurrency`` in flight. Each worker takes its next request itself, so a slow
consumer (the caller storing replies) never holds back the requests in flight; finished ones
come back through a queue, read in the calling thread, which is where ``on_result`` runs. A
permanent failure (``send`` raising :class:`Fatal`), or the first :data:`FAIL_FAST_AFTER`
results all failing the same way, stops the run: nothing new is started, those in flight finish
and are handed to ``on_result``, then :class:`~rageval.judge.requests.JudgeError` is raised.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rageval.core.errors import UsageError
from rageval.core.workers import SharedLimits
from rageval.judge.requests import JudgeError, JudgeRequest, JudgeResult

__all__ = ["FAIL_FAST_AFTER", "Fatal", "FirstFailures", "Stopped", "run_pool"]

#: The first results of a run that, failing all the same way, stop the run (fail fast).
FAIL_FAST_AFTER = 3

Send = Callable[[int, JudgeRequest, threading.Event], JudgeResult]


class Fatal(Exception):
    """A permanent failure inside a worker (carries an already-redacted message)."""


@dataclass(frozen=True)
class _Done:
    """A worker has no more requests to send (``error``: the exception that ended it)."""

    error: BaseException | None


class Stopped(Exception):
    """The run was stopped before this request was sent."""


class TokenBucket:
    """At most ``rpm`` request starts per minute, evenly spaced (burst ``burst``)."""

    def __init__(self, rpm: float, burst: int = 1) -> None:
        if rpm <= 0:
            raise UsageError(f"rpm must be positive, got {rpm}")
        self.rate = rpm / 60.0
        self.capacity = float(max(1, burst))
        self.tokens = self.capacity
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self, stop: threading.Event) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.tokens >= 1.0:
                    self.tokens -= 1.0
                    return
                delay = (1.0 - self.tokens) / self.rate
            if stop.wait(min(delay, 0.25)):
                raise Stopped


def _lease(shared: SharedLimits, stop: threading.Event) -> object:
    """A lease from the shared limits, asked for a quarter second at a time so that a stopped
    run stops waiting."""
    while not stop.is_set():
        lease = shared.acquire(0.25)
        if lease is not None:
            return lease
    raise Stopped


class FirstFailures:
    """The first results of a run, watched for a run that fails the same way every time."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.errors: list[str] = []
        self.open = size > 0

    def add(self, result: JudgeResult) -> bool:
        """Count one result; True when the first ``size`` all failed with the same error."""
        if not self.open:
            return False
        if result.ok:
            self.open = False
            return False
        self.errors.append(result.error or "")
        if len(set(self.errors)) > 1:
            self.open = False
            return False
        if len(self.errors) == self.size:
            self.open = False
            return True
        return False

    @property
    def error(self) -> str:
        return self.errors[0] if self.errors else ""


def run_pool(requests: list[JudgeRequest], send: Send, *, concurrency: int,
             rpm: float | None, on_result: Callable[[JudgeResult], object] | None,
             fail_fast: Callable[[FirstFailures], str],
             shared: SharedLimits | None = None) -> list[JudgeResult]:
    """Every request through ``send``, ``concurrency`` at a time; results in input order.

    ``fail_fast(failures)`` words the error of a run whose first results all failed alike.
    ``shared`` (limits shared with other processes) leases each request before it is sent,
    retries included, and takes the lease back when it is over.
    """
    limiter = TokenBucket(rpm) if rpm is not None else None
    stop = threading.Event()
    results: list[JudgeResult | None] = [None] * len(requests)
    fatal: list[str] = []
    callback_error: list[BaseException] = []
    # Only worth it when requests would be left to send after the first few.
    first_failures = FirstFailures(FAIL_FAST_AFTER if len(requests) > FAIL_FAST_AFTER else 0)
    todo = iter(enumerate(requests))
    taken = threading.Lock()
    finished: queue.SimpleQueue[JudgeResult | str | _Done | None] = queue.SimpleQueue()

    def one(index: int, request: JudgeRequest) -> JudgeResult | str | None:
        """A result, a permanent-failure message (str), or None when stopped before sending."""
        try:
            if stop.is_set():
                return None
            if limiter is not None:
                limiter.acquire(stop)
            if shared is None:
                return send(index, request, stop)
            lease = _lease(shared, stop)
            try:
                return send(index, request, stop)
            finally:
                shared.release(lease)
        except Stopped:
            return None
        except Fatal as exc:
            stop.set()
            return str(exc)

    def worker() -> None:
        error: BaseException | None = None
        try:
            while not stop.is_set():
                with taken:
                    nxt = next(todo, None)
                if nxt is None:
                    return
                out = one(*nxt)
                finished.put(out)
                if isinstance(out, JudgeResult):
                    # Decided here, before this worker takes another request: waiting for the
                    # collecting thread would let fast failures start more requests meanwhile.
                    with taken:
                        tripped = first_failures.add(out)
                    if tripped:
                        stop.set()
                        finished.put(fail_fast(first_failures))
        except BaseException as exc:  # a bug in a worker must not hang the caller
            error = exc
        finally:
            finished.put(_Done(error))

    workers = min(concurrency, len(requests))
    with ThreadPoolExecutor(max_workers=max(1, workers),
                            thread_name_prefix="rageval-judge") as pool:
        for _ in range(workers):
            pool.submit(worker)
        running = workers
        try:
            while running:
                out = finished.get()
                if isinstance(out, _Done):
                    running -= 1
                    if out.error is not None:
                        stop.set()
                        callback_error.append(out.error)
                elif isinstance(out, str):  # a permanent failure, or the first ones alike
                    stop.set()
                    fatal.append(out)
                elif isinstance(out, JudgeResult):
                    results[out.index] = out
                    if on_result is not None and not callback_error:
                        try:
                            on_result(out)
                        except BaseException as exc:
                            stop.set()
                            callback_error.append(exc)
        except BaseException:
            stop.set()  # e.g. KeyboardInterrupt: start nothing more, let in-flight end
            raise
    if callback_error:
        raise callback_error[0]
    if fatal:
        got = sum(1 for r in results if r is not None and r.ok)
        raise JudgeError(f"{fatal[0]}; the run stopped after {got} of {len(requests)} replies",
                         results=results)
    return [r for r in results if r is not None]
