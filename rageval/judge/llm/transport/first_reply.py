"""A run's first judge reply: the bound on the time before it, and a judge that never gives one.

The SDK's retries make one request last up to ``(max_retries + 1) * timeout`` plus backoff (12
minutes with the defaults), and a run sends its first requests one at a time while it learns
which response format the endpoint takes: an endpoint that accepts connections and never
answers would hold a run for over half an hour before it failed. Until the first reply of a
run arrives, each attempt is therefore sent by :func:`send_before_first_reply`: one attempt at a
time (the SDK not retrying), each given no more than the time left before the deadline, so the
run stops when :class:`FirstReply` runs out, with one line that says so. A connection refused
before the first reply is not retried at all (:func:`refused_before_reply`): nothing listens at
the endpoint, and the run stops in seconds naming it. Once any reply has arrived the SDK's own
retries take over again.

A judge that answers none of its requests is not there, however few they were: a run whose
first :data:`~rageval.judge.llm.transport.pool.FAIL_FAST_AFTER` requests fail alike stops
early, and one with fewer requests, all failed, stops when they are done
(:func:`raise_unanswered`), with the same message (:func:`no_reply`), so that whether a dead
endpoint stops a run never depends on how many requests it had to fail.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, TypeVar

import openai

# The deadline is the configuration's (a manifest reads it without importing the SDK).
from rageval.judge.llm.config import DEFAULT_FIRST_REPLY_S, first_reply_limit
from rageval.judge.llm.transport.pool import Fatal
from rageval.judge.llm.transport.requests import JudgeError, JudgeResult
from rageval.judge.llm.transport.sdk import is_refused, is_transient

if TYPE_CHECKING:
    from rageval.judge.llm.transport.pool import FirstFailures, RunStopped

__all__ = ["CUT_AT_LIMIT", "DEFAULT_FIRST_REPLY_S", "FirstReply", "failed_alike",
           "first_reply_limit", "no_reply", "raise_unanswered", "refused", "refused_before_reply",
           "send_before_first_reply"]

# The SDK's own backoff between attempts (openai._constants): from half a second, doubling,
# at most 8 s, with up to a quarter taken off at random; a Retry-After up to a minute is obeyed.
_FIRST_DELAY_S = 0.5
_MOST_DELAY_S = 8.0
_MOST_TOLD_S = 60.0

T = TypeVar("T")


class FirstReply:
    """The deadline for a run's first reply: its clock starts with the first attempt."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._until: float | None = None
        self._answered = False
        self._lock = threading.Lock()

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None once a reply has arrived)."""
        with self._lock:
            if self._answered:
                return None
            now = time.monotonic()
            if self._until is None:
                self._until = now + self.limit_s
            return self._until - now

    def answered(self) -> None:
        """A reply has arrived: the deadline no longer applies."""
        with self._lock:
            self._answered = True


def send_before_first_reply(send: Callable[[int, float | None], T], attempts: int,
                            first: FirstReply, timeout_s: float, where: str) -> T:
    """``send(retries, timeout)`` with its ``attempts`` made here, one at a time (``retries``
    0), each within the time left before ``first``'s deadline (``timeout``);
    :class:`~rageval.judge.llm.transport.pool.Fatal` naming the deadline when it passes before
    a reply. Once a reply has arrived (this request's or another's), the attempts left go
    through the SDK as usual (``timeout`` None: the backend's own)."""
    for attempt in range(attempts):
        left = first.remaining()
        if left is None:
            return send(attempts - 1 - attempt, None)
        if left <= 0:
            raise Fatal(_too_late(where, first.limit_s, None))
        try:
            out = send(0, min(timeout_s, left))
        except (openai.APIConnectionError, openai.APIStatusError) as exc:
            transient = (isinstance(exc, openai.APIConnectionError)
                         or is_transient(exc))  # type: ignore[arg-type]
            if refused_before_reply(exc, first):
                raise  # nothing listens there: no passing fault, not worth another attempt
            if not transient or attempt == attempts - 1:
                if transient and _passed(first):
                    raise Fatal(_too_late(where, first.limit_s, exc)) from None
                raise
            left = first.remaining()
            if left is not None and left <= 0:
                raise Fatal(_too_late(where, first.limit_s, exc)) from None
            _pause(attempt, left, _retry_after(exc))
            continue
        first.answered()
        return out
    raise AssertionError("unreachable: the last attempt returns or raises")


def refused_before_reply(exc: BaseException, first: FirstReply) -> bool:
    """Whether ``exc`` is a refused connection met before any reply of the run: the endpoint
    is not there (a server not started, a wrong port), which no retry mends. Once a reply has
    arrived, a refused connection is a server restarting, and keeps its retries."""
    return (isinstance(exc, openai.APIConnectionError) and is_refused(exc)
            and first.remaining() is not None)


def refused(where: str) -> str:
    """Why a run stops when its first request finds nothing listening at the endpoint."""
    return (f"{where}: the connection was refused: nothing listens there (is the server "
            "running, and is --judge-base-url right?)")


def raise_unanswered(where: str, results: Sequence[JudgeResult | None],
                     stopped: RunStopped | None, replied_before: bool = False) -> None:
    """:class:`JudgeError` when no request of ``results`` (None: not sent) was answered, and
    the judge never was before in the run (``replied_before``): the permanent failure that
    ``stopped`` the run, else :func:`no_reply`. A request answered, or none sent and the run
    not stopped: nothing is raised (a run stopped for another reason raises its own error)."""
    sent = [r for r in results if r is not None]
    if replied_before or any(r.ok for r in sent) or not (sent or stopped):
        return
    why = stopped.before_any_reply() if stopped is not None else None
    raise JudgeError(why or no_reply(where, sent), results=list(results)) from None


#: How the failure of a reply cut at its token limit before any text begins (JudgeClient).
CUT_AT_LIMIT = "empty reply: the model reached its token limit"


def no_reply(where: str, failed: Sequence[JudgeResult]) -> str:
    """Why a judge that answered none of the requests ``failed`` (all sent) is taken for dead."""
    errors = list(dict.fromkeys(r.error or "no reply" for r in failed))
    if len(failed) == 1:
        asked = "its one request"
    elif len(errors) == 1:
        asked = f"any of the {len(failed)} requests sent, all failing alike"
    else:
        asked = f"any of the {len(failed)} requests sent, failing {len(errors)} ways, the first"
    if _cut_at_limit(errors[0]):  # it answers: its replies are what is wrong
        return f"{where} wrote no usable reply to {asked}, and the run stopped: {errors[0]}"
    return (f"{where} is taken for dead, and the run stopped: no reply to {asked} "
            f"(--judge-timeout and --judge-max-retries set the patience per request): "
            f"{errors[0]}")


def failed_alike(where: str, failures: FirstFailures) -> str:
    """Why a run stopped early, its first requests failing alike, when a request in flight
    was answered all the same (else :func:`no_reply` says it)."""
    patience = ("" if _cut_at_limit(failures.error) else
                " (--judge-timeout and --judge-max-retries set the patience per request)")
    return (f"{where}: the first {failures.size} requests all failed the same way, so no more "
            f"were sent: {failures.error}{patience}")


def _cut_at_limit(error: str) -> bool:
    """Whether a failure is a reply cut at its token limit before any text (a reasoning
    model's, see JudgeClient): it says itself what to change, and the patience per request
    has nothing to do with it."""
    return error.startswith(CUT_AT_LIMIT)


def _passed(first: FirstReply) -> bool:
    left = first.remaining()
    return left is not None and left <= 0


def _pause(attempt: int, left: float | None, told: float | None) -> None:
    """The wait before the next attempt: what the endpoint told (as the SDK takes it), else
    the SDK's backoff; never past the deadline."""
    if told is not None and 0 < told <= _MOST_TOLD_S:
        delay = told
    else:
        delay = min(_FIRST_DELAY_S * 2 ** attempt, _MOST_DELAY_S) * (1 - 0.25 * random.random())
    time.sleep(delay if left is None else max(0.0, min(delay, left)))


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the endpoint asked to wait (``retry-after-ms``, ``retry-after`` in seconds or
    as an HTTP date), or None."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    seconds = _number(value)
    if seconds is not None or value is None:
        return seconds
    try:
        return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, IndexError):
        return None


def _number(text: str | None) -> float | None:
    """``text`` read as a number (None: absent or not one)."""
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _too_late(where: str, limit_s: float, exc: BaseException | None) -> str:
    last = f" (the last attempt: {_kind(exc)})" if exc is not None else ""
    return (f"{where}: no reply within {limit_s:g} s of the first request{last}; the endpoint "
            "accepts connections but does not answer, or is too slow for this limit "
            "(--judge-first-reply-timeout sets it)")


def _kind(exc: BaseException) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return "connection failed"
