"""Which wire format an (endpoint, model) accepts, decided once and shared by every request.

A :class:`Negotiation` walks a mode's ladder of wire formats
(:mod:`rageval.judge.llm.transport.formats`). While the verdict on a format is unknown, exactly
one request carries it (the probe) and the others wait; a refusal steps every request down to
the next format, an accepted reply settles it. The verdicts are the run's: each
:class:`~rageval.judge.llm.transport.backend.ChatBackend` (one per endpoint and model of a run)
owns its own, so the clients of a run that share a backend do not probe again, and another
run decides anew. Plain ``text`` (no ``response_format``) is never refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Negotiation"]


@dataclass
class Negotiation:
    """Verdicts on wire formats for one (endpoint, model)."""

    accepted: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)  # format -> the endpoint's words
    _probing: set[str] = field(default_factory=set)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def choose(self, ladder: tuple[str, ...], stopped: Callable[[], bool]
               ) -> tuple[str | None, bool]:
        """The format to send next and whether this request is its probe; ``(None, False)``
        when the endpoint refused every format of the ladder. Waits while another request
        probes the format this one would use; returns ``(None, True)`` if ``stopped()``."""
        with self._cond:
            while True:
                for fmt in ladder:
                    if fmt in self.refused:
                        continue
                    if fmt in self.accepted or fmt == "text":
                        return fmt, False
                    if fmt not in self._probing:
                        self._probing.add(fmt)
                        return fmt, True
                    break  # wait for that probe's verdict
                else:
                    return None, False
                self._cond.wait(timeout=0.05)
                if stopped():
                    return None, True

    def settle(self, fmt: str, *, accepted: bool | None, why: str = "") -> None:
        """Record a verdict on ``fmt`` (None: still unknown, e.g. the probe met a passing
        fault) and wake the requests waiting for it."""
        with self._cond:
            self._probing.discard(fmt)
            if accepted is True:
                self.accepted.add(fmt)
            elif accepted is False:
                self.accepted.discard(fmt)
                self.refused[fmt] = why
            self._cond.notify_all()

    def current(self, ladder: tuple[str, ...]) -> str | None:
        """The format a request would use now, once decided (None while unknown)."""
        with self._cond:
            for fmt in ladder:
                if fmt in self.refused:
                    continue
                return fmt if fmt in self.accepted or fmt == "text" else None
            return None

