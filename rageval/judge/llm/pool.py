"""Sending many judge requests at once: a bounded pool of workers, a rate limit, and the rules
that stop a run.

:func:`run_pool` hands each request to ``send`` (one request, start to end, in a worker thread)
with at most ``concurrency`` in flight. Each worker takes its next request itself, so a slow
consumer (the caller storing replies) never holds back the requests in flight; finished ones
come back through a queue, read in the calling thread, which is where ``on_result`` runs (results
that arrive close together are handed over in one lot, then ``on_drained`` is called, so that the
caller can store them in one transaction). At most ``2 * concurrency`` requests are taken and not
yet handed over: a consumer slower than the endpoint holds back new requests once ``concurrency``
results wait for it, and a callback that fails stops the run after a known number of requests
however loaded the machine. A
permanent failure (``send`` raising :class:`Fatal`), or the first :data:`FAIL_FAST_AFTER`
results all failing the same way, stops the run: nothing new is started, those in flight finish
and are handed to ``on_result``, then :class:`~rageval.judge.llm.requests.JudgeError` is raised.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rageval.core.errors import UsageError
from rageval.core.workers import SharedLimits
from rageval.judge.llm.requests import JudgeError, JudgeRequest, JudgeResult

__all__ = ["FAIL_FAST_AFTER", "LINGER_S", "Fatal", "FirstFailures", "Stopped", "run_pool"]

#: The first results of a run that, failing all the same way, stop the run (fail fast).
FAIL_FAST_AFTER = 3

#: The least time between two lots of results handled by the calling thread (handed to
#: ``on_result``, then ``on_drained``), in seconds: how long a result waits to be handled,
#: beyond the time the calling thread spends on the lot before it.
LINGER_S = 0.02

Send = Callable[[int, JudgeRequest, threading.Event], JudgeResult]


class Fatal(Exception):
    """A permanent failure inside a worker (carries an already-redacted message)."""


@dataclass(frozen=True)
class _Done:
    """A worker has no more requests to send (``error``: the exception that ended it)."""

    error: BaseException | None


# What a worker hands back: a result, a message stopping the run (a permanent failure, or the
# first results failing alike), None for a request never sent, or the news that it is done.
_Out = JudgeResult | str | _Done | None


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
             shared: SharedLimits | None = None,
             on_drained: Callable[[], object] | None = None) -> list[JudgeResult]:
    """Every request through ``send``, ``concurrency`` at a time; results in input order.

    ``fail_fast(failures)`` words the error of a run whose first results all failed alike.
    ``shared`` (limits shared with other processes) leases each request before it is sent,
    retries included, and takes the lease back when it is over. ``on_drained`` is called
    after the results that were waiting have all been handed to ``on_result``, before waiting
    for more: the moment to store together what arrived together.
    """
    limiter = TokenBucket(rpm) if rpm is not None else None
    stop = threading.Event()
    # Every worker is started before any sends: a thread start waits for the new thread to run,
    # and while the first workers are busy sending, the last ones would start late.
    gate = threading.Event()
    results: list[JudgeResult | None] = [None] * len(requests)
    fatal: list[str] = []
    callback_error: list[BaseException] = []
    # Only worth it when requests would be left to send after the first few.
    first_failures = FirstFailures(FAIL_FAST_AFTER if len(requests) > FAIL_FAST_AFTER else 0)
    todo = iter(enumerate(requests))
    taken = threading.Lock()
    # A slot is held from taking a request until its result has been handed over (on_drained
    # included): how far the workers may run ahead of the calling thread, whatever the load.
    slots = threading.Semaphore(2 * max(1, min(concurrency, len(requests))))
    finished: queue.SimpleQueue[_Out] = queue.SimpleQueue()

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
            gate.wait()
            while _take_slot(slots, stop):
                with taken:
                    nxt = next(todo, None)
                if nxt is None:
                    slots.release()
                    return
                out = one(*nxt)
                if not isinstance(out, JudgeResult):
                    slots.release()  # only results wait for the calling thread
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
        try:
            for _ in range(workers):
                pool.submit(worker)
        finally:
            gate.set()
        try:
            _collect(finished, workers, results, stop, slots, fatal=fatal,
                     errors=callback_error, on_result=on_result, on_drained=on_drained)
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


def _take_slot(slots: threading.Semaphore, stop: threading.Event) -> bool:
    """A slot for one more request; False once the run is stopped."""
    while not stop.is_set():
        if slots.acquire(timeout=0.25):
            if not stop.is_set():
                return True
            slots.release()
    return False


def _collect(finished: queue.SimpleQueue[_Out], running: int,
             results: list[JudgeResult | None], stop: threading.Event,
             slots: threading.Semaphore, *, fatal: list[str],
             errors: list[BaseException], on_result: Callable[[JudgeResult], object] | None,
             on_drained: Callable[[], object] | None) -> None:
    """In the calling thread, until the ``running`` workers are done: each lot of what they
    handed back, results to ``on_result`` (then ``on_drained``, then their ``slots`` back),
    permanent failures to ``fatal`` and the workers' and callbacks' errors to ``errors`` (both
    stop the run)."""
    last = -math.inf  # when the previous lot of results was handled
    while running:
        handed = 0
        for out in _waiting(finished, last):
            if isinstance(out, _Done):
                running -= 1
                if out.error is not None:
                    stop.set()
                    errors.append(out.error)
            elif isinstance(out, str):  # a permanent failure, or the first ones alike
                stop.set()
                fatal.append(out)
            elif isinstance(out, JudgeResult):
                results[out.index] = out
                _call(on_result, out, stop, errors)
                handed += 1
        if handed:
            _call(on_drained, None, stop, errors)
            slots.release(handed)
        last = time.monotonic()


def _waiting(finished: queue.SimpleQueue[_Out], last: float) -> list[_Out]:
    """What the workers have handed back: at least one item (waiting for it), and every other
    one there by then; when the previous lot was handled (at monotonic time ``last``) less
    than :data:`LINGER_S` ago, by that much after it."""
    out = [finished.get()]
    # Waking up, and storing, once per result would make the calling thread take the
    # interpreter lock back from the sending threads hundreds of times a second at high
    # concurrency: a result that follows the previous lot closely waits a moment, and the
    # results that come meanwhile join it. A result alone (the first one) is never held back.
    pause = last + LINGER_S - time.monotonic()
    if pause > 0:
        time.sleep(pause)
    try:
        while True:
            out.append(finished.get_nowait())
    except queue.Empty:
        return out


def _call(callback: Callable[..., object] | None, arg: JudgeResult | None,
          stop: threading.Event, errors: list[BaseException]) -> None:
    """``callback(arg)`` (no argument when ``arg`` is None) unless an earlier callback failed;
    a failure stops the run and is kept to be raised once the requests in flight are over."""
    if callback is None or errors:
        return
    try:
        if arg is None:
            callback()
        else:
            callback(arg)
    except BaseException as exc:
        stop.set()
        errors.append(exc)
