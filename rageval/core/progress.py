"""The shapes of progress callbacks, so that long steps can say how far they are without
knowing who listens (a terminal bar, a log, a test).

Both are optional everywhere they are accepted, never change a value and are never part of a
signature. A callback is called from the thread doing the work, every so often (not per item),
and must return quickly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["LoadProgress", "StepProgress"]

#: Reading a records file: ``(done, total)`` in the reader's unit (bytes of a JSONL or CSV
#: file, characters of a JSON array, rows of a Parquet file); ``total`` is None when unknown.
#: Counts never go down and the last call has ``done == total``.
LoadProgress = Callable[[int, int | None], None]


class StepProgress(Protocol):
    """A named step of a run reporting how far it is (``ScoreOptions.steps``).

    ``step`` names the work, for example ``"bertscore embedding (all-MiniLM-L6-v2)"``; a run
    may have several steps, told apart by name. ``done`` and ``total`` count the step's
    own units (texts embedded, say): ``done`` never goes down, ``total`` is None while unknown,
    and a finished step's last call has ``done == total``. ``info`` is a short human-readable
    note to show beside the count (such as how much came from a cache), or ``""``.
    """

    def __call__(self, step: str, done: int, total: int | None, info: str) -> None: ...
