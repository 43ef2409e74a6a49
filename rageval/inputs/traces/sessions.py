"""Traces grouped by session: the records of traces sharing a session id (OpenInference's
``session.id``, the GenAI conventions' ``gen_ai.conversation.id``) become the turns of one
conversation (``--trace-sessions``).

A session's traces can lie anywhere in a file, so the records of sessions are held until every
trace is read, then handed over as conversations, each in the order its turns started; the
records of traces without a session go on as records on their own, as they are read. The
conversation's id is the session id and each turn's own id the record's (the trace id, or the
span id of a ``--trace-unit`` span), so a turn is ``<session>#<trace>``; a turn keeps
``trace_id`` and ``span_id`` among its fields, for its scores to go back to its span.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rageval.inputs.traces.spans import Span, attribute
from rageval.inputs.traces.tree import by_start

__all__ = ["SESSION_ID", "Sessions"]

#: The OpenInference attribute naming a span's session (a conversation's traces share it).
SESSION_ID = "session.id"


class Sessions:
    """The records of sessions, held until the input is read."""

    def __init__(self, key: str = SESSION_ID) -> None:
        self._key = key  # the attribute naming a span's session
        # session id -> (start, arrival, line, record object), for each of its records
        self._held: dict[str, list[tuple[int, int, int, dict[str, Any]]]] = {}
        self._arrivals = 0

    def hold(self, spans: list[Span], line: int, item: dict[str, Any]) -> bool:
        """Keep ``item`` (a record of the trace ``spans``) when the trace has a session;
        whether it was kept."""
        session = _session(spans, self._key)
        if session is None:
            return False
        start = min(span.start for span in spans)
        self._arrivals += 1
        self._held.setdefault(session, []).append((start, self._arrivals, line, item))
        return True

    def conversations(self) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """``(line, session, conversation object)`` for each session, in the order first
        met; the line is that of its first turn's root span."""
        for session, held in self._held.items():
            held.sort(key=lambda entry: (entry[0], entry[1]))
            turns = [item for _, _, _, item in held]
            yield held[0][2], session, {"id": session, "turns": turns}
        self._held.clear()


def _session(spans: list[Span], key: str) -> str | None:
    """The trace's session id: the first span, in start order, that names one (``key``)."""
    for span in sorted(spans, key=by_start):
        value = attribute(span, key)
        if value is not None and value != "":
            return str(value)
    return None
