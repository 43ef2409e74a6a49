"""Process-wide counters of the embedding work (forward passes, cache hits and writes, model
loads), for tests and benchmarks."""

from __future__ import annotations

from collections import Counter

_STATS: Counter = Counter()


def cache_stats() -> dict[str, int]:
    """Counters since the last reset: ``forward_passes``, ``texts_embedded``, ``memory_hits``,
    ``disk_hits``, ``disk_writes``, ``disk_corrupt`` (files found damaged and recomputed),
    ``model_loads``."""
    keys = ("forward_passes", "texts_embedded", "memory_hits", "disk_hits", "disk_writes",
            "disk_corrupt", "model_loads")
    return {k: int(_STATS[k]) for k in keys}


def reset_cache_stats() -> None:
    _STATS.clear()
