"""The loopback judge (:mod:`judge_server`), watched request by request: which connection each
request came on (the client's port, so its process can be told), when it arrived and when its
answer was over, and a gate that holds every reply until it is opened (so that a node can be
lost while its requests are surely in flight)."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_server import JudgeServer, _Handler, _Server


@dataclass
class Request:
    port: int  # the client's port: which process asked
    message: str  # the last user message: which record and prompt
    start: float
    end: float | None = None


class _WatchedHandler(_Handler):
    def do_POST(self) -> None:
        judge = self.server.judge
        assert isinstance(judge, WatchedJudge)
        judge._local.port = self.client_address[1]
        try:
            super().do_POST()
        finally:
            judge._finished()


class WatchedJudge(JudgeServer):
    """A :class:`JudgeServer` keeping a :class:`Request` per request (:attr:`log`)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.log: list[Request] = []
        self.gate = threading.Event()  # cleared: replies wait
        self.gate.set()
        self._local = threading.local()

    def start(self) -> WatchedJudge:
        self._httpd = _Server(("127.0.0.1", 0), _WatchedHandler)
        self._httpd.judge = self
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def _record(self, body: dict[str, Any]) -> str | None:
        fault = super()._record(body)
        request = Request(self._local.port, self.last_user_message(body), time.monotonic())
        with self._lock:
            self.log.append(request)
        self._local.request = request
        self.gate.wait()
        return fault

    def _finished(self) -> None:
        request = getattr(self._local, "request", None)
        if request is not None:
            request.end = time.monotonic()
            self._local.request = None

    def open_now(self) -> list[Request]:
        """The requests being answered now."""
        with self._lock:
            return [r for r in self.log if r.end is None]

    def asked(self) -> dict[str, int]:
        """How many times each message was asked."""
        counts: dict[str, int] = {}
        with self._lock:
            for r in self.log:
                counts[r.message] = counts.get(r.message, 0) + 1
        return counts


def most_at_once(requests: list[Request]) -> int:
    """The most of these requests that were being answered at the same moment."""
    events = sorted([(r.start, 1) for r in requests]
                    + [(r.end if r.end is not None else float("inf"), -1) for r in requests],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def most_started_within(requests: list[Request], seconds: float) -> int:
    """The most of these requests that arrived within any window of ``seconds``."""
    starts = sorted(r.start for r in requests)
    most, first = 0, 0
    for last, t in enumerate(starts):
        while t - starts[first] > seconds:
            first += 1
        most = max(most, last - first + 1)
    return most
