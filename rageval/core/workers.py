"""What a metric's work needs to travel to another process (a worker of the Ray engine): its
run options without the caller's callbacks, with absolute paths and with what the run shares
(limits, a store) reached through the engine's :class:`Sharing`, and the environment scoring
reads."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any, Protocol

from rageval.core.metric import ScoreOptions


class SharedLimits(Protocol):
    """Limits every worker of a run obeys together (one concurrency cap, one request rate),
    whatever process asks: a worker takes a lease before each request and gives it back after.
    """

    def acquire(self, timeout: float) -> object | None:
        """A lease once a request may start, or None if none came within ``timeout`` s."""

    def release(self, lease: object) -> None:
        """Give a lease back (its request is over)."""


class Sharing(Protocol):
    """What an engine running workers in other processes offers them to share: limits every
    worker obeys together, and services, one object living in one place (the caller's
    machine) whose methods every worker calls."""

    def limits(self, concurrency: int, rpm: float | None) -> SharedLimits:
        """One concurrency cap and request rate for every worker; the leases of a worker
        that died are taken back. The same limits for the same (concurrency, rpm) throughout
        a run."""

    def service(self, key: Hashable, build: Callable[..., Any], *args: Any) -> Any:
        """A proxy of ``build(*args)``, built once per ``key`` in the caller's machine: every
        method called on the proxy runs there, in turn, and returns its result."""


# Embedding-cache settings that name no directory (the metric's own default, or none).
_NOT_A_PATH = ("auto", "none", "off", "false", "no", "0")


def options_for_workers(options: ScoreOptions, workers: int,
                        sharing: Sharing | None = None) -> ScoreOptions:
    """The run options each of ``workers`` processes scores with: no progress callbacks (they
    stay with the caller), paths made absolute (a worker's directory is not the caller's), and
    the run's limits and stores (the judge's concurrency, rate and reply cache, through its
    options' ``for_workers``) shared through ``sharing`` or, without it, the limits shared out
    statically. Values and signatures are those of ``options``."""
    judge = options.judge
    if judge is not None and hasattr(judge, "for_workers"):
        judge = judge.for_workers(workers, sharing)
    cache = options.embedding_cache
    if cache is not None and cache.strip().lower() not in _NOT_A_PATH:
        cache = os.path.abspath(os.path.expanduser(cache))
    return replace(options, steps=None, judge=judge, embedding_cache=cache)


# Environment variables a worker process needs as the caller has them: rageval's own settings
# (caches), the model hubs' (offline mode, their caches).
_WORKER_ENV_PREFIXES = ("RAGEVAL_", "HF_", "TRANSFORMERS_")


# Variables whose values are secrets by their name (API keys, tokens, passwords).
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


def worker_environment(options: ScoreOptions) -> tuple[dict[str, str], dict[str, str]]:
    """What a worker process must find in its environment to score as this one does (a
    cluster's workers do not inherit the caller's environment): rageval's and the model hubs'
    settings, and the variable holding the judge's API key. Returned as (plain, secret): the
    key variable, whatever its name, and any variable named like a secret, are secret."""
    names = {name for name in os.environ if name.startswith(_WORKER_ENV_PREFIXES)}
    key_variable = getattr(options.judge, "api_key_env", None)
    if key_variable:
        names.add(key_variable)
    plain: dict[str, str] = {}
    secret: dict[str, str] = {}
    for name in sorted(names):
        if name in os.environ:
            secret_name = name == key_variable or _SECRET.search(name) is not None
            (secret if secret_name else plain)[name] = os.environ[name]
    return plain, secret
