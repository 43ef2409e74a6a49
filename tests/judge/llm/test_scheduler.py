"""The judge's scheduler on its own (no endpoint): requests through a ``send`` in worker
threads, results in input order, the bound on requests in flight, and the stops of a run as one
error (:class:`RunStopped`) that says why."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from rageval.judge.llm.transport.pool import (
    FAIL_FAST_AFTER,
    Fatal,
    FirstFailures,
    RunStopped,
    Scheduler,
)
from rageval.judge.llm.transport.requests import JudgeRequest, JudgeResult

Send = Callable[[int, JudgeRequest, threading.Event], JudgeResult]


def _requests(n: int) -> list[JudgeRequest]:
    return [JudgeRequest([{"role": "user", "content": f"q{i}"}], tag=i) for i in range(n)]


def _reply(index: int, request: JudgeRequest, text: str | None = "ok",
           error: str | None = None) -> JudgeResult:
    return JudgeResult(index=index, request=request, text=text, usage={}, error=error)


def _alike(failures: FirstFailures) -> str:
    return f"the first {failures.size} alike: {failures.error}"


def _scheduler(n: int, send: Send, **kw: object) -> Scheduler:
    options: dict = {"concurrency": 4, "fail_fast": _alike, **kw}
    return Scheduler(_requests(n), send, **options)


def test_every_request_once_results_in_input_order() -> None:
    def send(index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        time.sleep(0.001 * (index % 3))  # finishing out of order
        return _reply(index, request, text=f"r{index}")

    handed: list[int] = []
    drained: list[int] = []
    results = _scheduler(20, send, on_result=lambda r: handed.append(r.index),
                         on_drained=lambda: drained.append(len(handed))).run()
    assert [r.text for r in results] == [f"r{i}" for i in range(20)]
    assert sorted(handed) == list(range(20))
    assert drained and drained[-1] == 20  # every lot drained after its results


def test_at_most_concurrency_requests_in_flight() -> None:
    lock = threading.Lock()
    now = [0]
    most = [0]

    def send(index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.005)
        with lock:
            now[0] -= 1
        return _reply(index, request)

    assert len(_scheduler(24, send, concurrency=3).run()) == 24
    assert most[0] == 3


def test_a_permanent_failure_stops_the_run_with_the_results_so_far() -> None:
    def send(index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        if index == 2:
            raise Fatal("endpoint: HTTP 401, authentication failed")
        return _reply(index, request)

    with pytest.raises(RunStopped) as info:
        _scheduler(50, send, concurrency=1).run()
    stop = info.value
    assert stop.cause == stop.permanent == "endpoint: HTTP 401, authentication failed"
    assert str(stop) == ("endpoint: HTTP 401, authentication failed; the run stopped after "
                         "2 of 50 replies")
    assert stop.replies == 2 and stop.total == 50
    assert [r is not None for r in stop.results[:3]] == [True, True, False]
    assert all(r is None for r in stop.results[3:])  # nothing started after the stop
    assert stop.before_any_reply() == ("endpoint: HTTP 401, authentication failed; the run "
                                       "stopped before any reply")


def test_the_first_results_failing_alike_stop_the_run() -> None:
    sent: list[int] = []

    def send(index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        sent.append(index)
        return _reply(index, request, text=None, error="HTTP 503: busy")

    with pytest.raises(RunStopped) as info:
        _scheduler(40, send, concurrency=1).run()
    stop = info.value
    assert stop.cause == f"the first {FAIL_FAST_AFTER} alike: HTTP 503: busy"
    assert stop.permanent is None and stop.before_any_reply() is None
    assert len(sent) == FAIL_FAST_AFTER and stop.replies == 0


def test_failures_that_differ_do_not_stop_the_run() -> None:
    def send(index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        return _reply(index, request, text=None, error=f"HTTP 500: error {index}")

    results = _scheduler(10, send, concurrency=1).run()
    assert len(results) == 10 and not any(r.ok for r in results)


def test_a_failing_callback_stops_the_run_and_is_raised_as_it_is() -> None:
    def send(index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        return _reply(index, request)

    def store(result: JudgeResult) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _scheduler(100, send, concurrency=2, on_result=store).run()


def test_a_bug_in_send_is_raised_not_hung() -> None:
    def send(index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        raise ZeroDivisionError("a bug")

    with pytest.raises(ZeroDivisionError):
        _scheduler(5, send).run()


def test_shared_limits_lease_each_request_and_take_it_back() -> None:
    class Limits:
        def __init__(self) -> None:
            self.held = 0
            self.leases = 0
            self.lock = threading.Lock()

        def acquire(self, timeout: float) -> object:
            with self.lock:
                self.held += 1
                self.leases += 1
            return object()

        def release(self, lease: object) -> None:
            with self.lock:
                self.held -= 1

    limits = Limits()

    def send(index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        return _reply(index, request)

    _scheduler(12, send, shared=limits).run()
    assert limits.leases == 12 and limits.held == 0
