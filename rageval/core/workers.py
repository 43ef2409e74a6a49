"""What a metric's work needs to travel to another process (a worker of the Ray engine): its
run options without the caller's callbacks and with run-wide limits shared out, and the
environment scoring reads."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from rageval.core.metric import ScoreOptions


class SharedLimits(Protocol):
    """Limits every worker of a run obeys together (one concurrency cap, one request rate),
    whatever process asks: a worker takes a lease before each request and gives it back after.
    """

    def acquire(self, timeout: float) -> object | None:
        """A lease once a request may start, or None if none came within ``timeout`` s."""

    def release(self, lease: object) -> None:
        """Give a lease back (its request is over)."""


#: Makes the limits a run's workers share: ``(concurrency, rpm, lease_s)`` -> the limits,
#: where a lease not given back within ``lease_s`` seconds (its worker died) is taken back.
#: Called once per distinct (concurrency, rpm) of the run: the engine keeps one per pair.
LimitsFactory = Callable[[int, "float | None", float], SharedLimits]


def options_for_workers(options: ScoreOptions, workers: int,
                        limits: LimitsFactory | None = None) -> ScoreOptions:
    """The run options each of ``workers`` processes scores with: no progress callbacks (they
    stay with the caller), and the run's limits (the judge's concurrency and rate, through its
    options' ``for_workers``) either enforced together by ``limits`` or, without it, shared
    out statically. Values and signatures are those of ``options``."""
    judge = options.judge
    if judge is not None and hasattr(judge, "for_workers"):
        judge = judge.for_workers(workers, limits)
    return replace(options, steps=None, judge=judge)


# Environment variables a worker process needs as the caller has them: rageval's own settings
# (caches), the model hubs' (offline mode, their caches).
_WORKER_ENV_PREFIXES = ("RAGEVAL_", "HF_", "TRANSFORMERS_")


def worker_environment(options: ScoreOptions) -> dict[str, str]:
    """What a worker process must find in its environment to score as this one does:
    rageval's and the model hubs' settings, and the variable naming the judge's API key (a
    cluster's workers do not inherit the caller's environment)."""
    names = {name for name in os.environ if name.startswith(_WORKER_ENV_PREFIXES)}
    key_variable = getattr(options.judge, "api_key_env", None)
    if key_variable:
        names.add(key_variable)
    return {name: os.environ[name] for name in sorted(names) if name in os.environ}
