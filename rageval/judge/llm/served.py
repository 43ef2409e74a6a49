"""Which model answered: the served model a reply names, checked against the cached replies.

An endpoint answers for a model *name*, and rageval keys its cache by that name. What serves the
name can change under it: llama.cpp's ``llama-server`` answers any name with whatever GGUF it
loaded (and names that file in each reply's ``model``), and OpenAI moves an alias to a new
snapshot. Every reply's ``model`` is kept in the cache beside it (``served_model``), so an online
run can tell when the endpoint now serves something else than the cached replies came from, and
stop before it mixes the two (``--refresh`` asks again; ``JudgeOptions.any_served_model``
reuses them knowingly).

A served model equal to the requested name says nothing (an endpoint that echoes the name would
say the same after a swap), so only served models that differ from the name are compared; when
such cached replies would answer a whole online run, a one-token request asks what is served
now (the run's backend for the endpoint and model remembers the answer for a minute).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from rageval.judge.llm.transport.requests import JudgeError

__all__ = ["ServedCheck"]


class ServedCheck:
    """The served models of the cached replies a run reuses, and the check of what the
    endpoint serves now against them."""

    def __init__(self, name: str, cached: Iterable[str | None], *, enabled: bool) -> None:
        self.name = name
        self.enabled = enabled
        self.cached = Counter(m for m in cached if m and m != name)
        self.now: str | None = None

    @property
    def needed(self) -> bool:
        """Whether the cached replies name a served model worth comparing."""
        return self.enabled and bool(self.cached)

    def probe(self, client: Any) -> None:
        """Ask the endpoint what it serves now (``JudgeClient.served_model``: one answer
        serves the rounds of a run that follow within a minute); check it."""
        try:
            served = client.served_model()
        except JudgeError:
            return  # unknown: the endpoint could not say (a run needing no request goes on)
        self.check(served)

    def check(self, served: str | None) -> None:
        """Raise :class:`JudgeError` when the endpoint serves another model than the cached
        replies came from (the first fresh reply's ``model``, or the probe's)."""
        if not self.needed or served is None or served == self.name or self.now is not None:
            return  # an echo of the name tells nothing a swap would change
        self.now = served
        others = {m: n for m, n in self.cached.items() if m != served}
        if others:
            before = ", ".join(f"{m!r} ({n} replies)" for m, n in sorted(others.items()))
            raise JudgeError(
                f"the judge endpoint now serves {served!r} under the name {self.name!r}, but "
                f"cached replies this run would reuse came from {before}: ask again with "
                "--refresh, or reuse them knowingly with --judge-any-served-model")
