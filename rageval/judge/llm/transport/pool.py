"""Sending many judge requests at once: a bounded pool of workers, a rate limit, and the rules
that stop a run.

:class:`Scheduler` hands each request to ``send`` (one request, start to end, in a worker thread)
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
and are handed to ``on_result``, then :class:`RunStopped` (a
:class:`~rageval.judge.llm.transport.requests.JudgeError`) is raised, saying why.
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
from rageval.judge.llm.transport.requests import JudgeError, JudgeRequest, JudgeResult

__all__ = ["FAIL_FAST_AFTER", "LINGER_S", "Fatal", "FirstFailures", "RunStopped", "Scheduler",
           "Stopped", "TokenBucket"]

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


class RunStopped(JudgeError):
    """The scheduler stopped the run: a request failed for good (``send`` raised
    :class:`Fatal`), or the first :data:`FAIL_FAST_AFTER` results failed alike. Raised once
    the requests in flight are over, with every result (None: a request not sent).

    ``cause``: why, as worded (the first stop reason to reach the calling thread);
    ``permanent``: the first permanent failure's message, if one stopped the run."""

    def __init__(self, cause: str, *, permanent: str | None, total: int,
                 results: list[JudgeResult | None]) -> None:
        self.cause = cause
        self.permanent = permanent
        self.total = total
        self.replies = sum(1 for r in results if r is not None and r.ok)
        super().__init__(f"{cause}; the run stopped after {self.replies} of {total} replies",
                         results=results)

    def before_any_reply(self) -> str | None:
        """Why the run stopped, said of a run that got no reply at all: the permanent failure
        that stopped it (None when only its first results failing alike did)."""
        if self.permanent is None:
            return None
        return f"{self.permanent}; the run stopped before any reply"


@dataclass(frozen=True)
class _Alike:
    """The first results of the run all failed the same way (the message says how)."""

    message: str


# What a worker hands back: a result, a reason stopping the run (a permanent failure's message,
# or the first results failing alike), None for a request never sent, or the news that it is done.
_Out = JudgeResult | str | _Alike | _Done | None


class Scheduler:
    """Every request of a list through ``send``, ``concurrency`` at a time (:meth:`run`).

    ``rpm`` caps request starts per minute; ``shared`` (limits shared with other processes)
    leases each request before it is sent, retries included, and takes the lease back when it
    is over. ``fail_fast(failures)`` words the stop of a run whose first results all failed
    alike. ``on_result`` gets each result as it arrives, ``on_drained`` each lot after its
    results, in the calling thread: the moment to store together what arrived together.
    One scheduler runs one list of requests.
    """

    def __init__(self, requests: list[JudgeRequest], send: Send, *, concurrency: int,
                 rpm: float | None = None, fail_fast: Callable[[FirstFailures], str],
                 shared: SharedLimits | None = None,
                 on_result: Callable[[JudgeResult], object] | None = None,
                 on_drained: Callable[[], object] | None = None) -> None:
        self.requests = requests
        self.send = send
        self.workers = min(concurrency, len(requests))
        self.limiter = TokenBucket(rpm) if rpm is not None else None
        self.fail_fast = fail_fast
        self.shared = shared
        self.on_result = on_result
        self.on_drained = on_drained
        self.stop = threading.Event()
        # Every worker is started before any sends: a thread start waits for the new thread
        # to run, and while the first workers are busy sending, the last ones would start late.
        self.gate = threading.Event()
        self.results: list[JudgeResult | None] = [None] * len(requests)
        self.stops: list[str | _Alike] = []  # why the run stopped, as reported
        self.errors: list[BaseException] = []  # the workers' and callbacks' own errors
        # Only worth it when requests would be left to send after the first few.
        self.first_failures = FirstFailures(
            FAIL_FAST_AFTER if len(requests) > FAIL_FAST_AFTER else 0)
        self._todo = iter(enumerate(requests))
        self._taken = threading.Lock()
        # A slot is held from taking a request until its result has been handed over
        # (on_drained included): how far the workers may run ahead of the calling thread.
        self.slots = threading.Semaphore(2 * max(1, self.workers))
        self._finished: queue.SimpleQueue[_Out] = queue.SimpleQueue()

    def run(self) -> list[JudgeResult]:
        """The results in input order; :class:`RunStopped` when the run was stopped, a
        worker's or callback's own error as it is, once the requests in flight are over."""
        with ThreadPoolExecutor(max_workers=max(1, self.workers),
                                thread_name_prefix="rageval-judge") as pool:
            try:
                for _ in range(self.workers):
                    pool.submit(self._worker)
            finally:
                self.gate.set()
            try:
                self._collect()
            except BaseException:
                self.stop.set()  # e.g. KeyboardInterrupt: start nothing more, let in-flight end
                raise
        if self.errors:
            raise self.errors[0]
        if self.stops:
            raise self.stopped()
        return [r for r in self.results if r is not None]

    def stopped(self) -> RunStopped:
        """The error of a run stopped for :attr:`stops` (a stop reason at least)."""
        permanent = next((why for why in self.stops if isinstance(why, str)), None)
        first = self.stops[0]
        return RunStopped(first if isinstance(first, str) else first.message,
                          permanent=permanent, total=len(self.requests), results=self.results)

    # -- the workers ---------------------------------------------------------------------

    def _worker(self) -> None:
        error: BaseException | None = None
        try:
            self.gate.wait()
            while _take_slot(self.slots, self.stop):
                with self._taken:
                    nxt = next(self._todo, None)
                if nxt is None:
                    self.slots.release()
                    return
                out = self._one(*nxt)
                if not isinstance(out, JudgeResult):
                    self.slots.release()  # only results wait for the calling thread
                self._finished.put(out)
                if isinstance(out, JudgeResult):
                    self._watch(out)
        except BaseException as exc:  # a bug in a worker must not hang the caller
            error = exc
        finally:
            self._finished.put(_Done(error))

    def _one(self, index: int, request: JudgeRequest) -> JudgeResult | str | None:
        """A result, a permanent-failure message (str), or None when stopped before sending."""
        try:
            if self.stop.is_set():
                return None
            if self.limiter is not None:
                self.limiter.acquire(self.stop)
            if self.shared is None:
                return self.send(index, request, self.stop)
            lease = _lease(self.shared, self.stop)
            try:
                return self.send(index, request, self.stop)
            finally:
                self.shared.release(lease)
        except Stopped:
            return None
        except Fatal as exc:
            self.stop.set()
            return str(exc)

    def _watch(self, result: JudgeResult) -> None:
        """Count ``result`` among the run's first ones; stop the run when they failed alike.
        Decided in the worker, before it takes another request: waiting for the calling
        thread would let fast failures start more requests meanwhile."""
        with self._taken:
            tripped = self.first_failures.add(result)
        if tripped:
            self.stop.set()
            self._finished.put(_Alike(self.fail_fast(self.first_failures)))

    # -- the calling thread --------------------------------------------------------------

    def _collect(self) -> None:
        """Until the workers are done: each lot of what they handed back, results to
        ``on_result`` (then ``on_drained``, then their slots back), stop reasons to
        :attr:`stops` and the workers' and callbacks' errors to :attr:`errors` (both stop
        the run)."""
        running = self.workers
        last = -math.inf  # when the previous lot of results was handled
        while running:
            handed = 0
            for out in _waiting(self._finished, last):
                if isinstance(out, _Done):
                    running -= 1
                    if out.error is not None:
                        self.stop.set()
                        self.errors.append(out.error)
                elif isinstance(out, (str, _Alike)):
                    self.stop.set()
                    self.stops.append(out)
                elif isinstance(out, JudgeResult):
                    self.results[out.index] = out
                    self._call(self.on_result, out)
                    handed += 1
            if handed:
                self._call(self.on_drained, None)
                self.slots.release(handed)
            last = time.monotonic()

    def _call(self, callback: Callable[..., object] | None, arg: JudgeResult | None) -> None:
        """``callback(arg)`` (no argument when ``arg`` is None) unless an earlier callback
        failed; a failure stops the run and is kept to be raised once the requests in flight
        are over."""
        if callback is None or self.errors:
            return
        try:
            if arg is None:
                callback()
            else:
                callback(arg)
        except BaseException as exc:
            self.stop.set()
            self.errors.append(exc)


def _take_slot(slots: threading.Semaphore, stop: threading.Event) -> bool:
    """A slot for one more request; False once the run is stopped."""
    while not stop.is_set():
        if slots.acquire(timeout=0.25):
            if not stop.is_set():
                return True
            slots.release()
    return False


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
