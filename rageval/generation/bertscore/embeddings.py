"""The token embeddings of texts, computed once: from memory, else from the disk cache, else
from the model (and then stored in both).

In memory, embeddings are kept for the life of the process in a bounded LRU
(``RAGEVAL_EMBEDDING_MEMORY_MB``, default 2048), so that the references shared by several
systems, or several BERTScore variants (``idf`` on and off), are embedded once. The disk cache
(:mod:`~rageval.generation.bertscore.disk_cache`) keeps them across runs.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from rageval.generation.bertscore.entries import _Entry, _text_key
from rageval.generation.bertscore.progress import _STATS

if TYPE_CHECKING:
    from rageval.generation.bertscore.disk_cache import _DiskCache
    from rageval.generation.bertscore.engine import _Engine

MEMORY_ENV = "RAGEVAL_EMBEDDING_MEMORY_MB"


class _MemoryCache:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self._items: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> _Entry | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                self._items.move_to_end(key)
            return entry

    def put(self, key: tuple[str, str], entry: _Entry) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.used -= old.nbytes
            self._items[key] = entry
            self.used += entry.nbytes
            while self.used > self.budget and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self.used -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.used = 0


def _memory_budget() -> int:
    raw = os.environ.get(MEMORY_ENV)
    with contextlib.suppress(ValueError, TypeError):
        return max(int(float(raw)), 0) << 20  # type: ignore[arg-type]
    return 2048 << 20


_MEMORY = _MemoryCache(_memory_budget())


def _embeddings(
    engine: _Engine,
    texts: Sequence[str],
    disk: _DiskCache | None,
    device: str,
    batch_size: int,
    progress: Callable[[Sequence[str], bool], None] | None = None,
) -> dict[str, _Entry]:
    """The entry of every text: from memory, else from disk, else computed (and stored).

    ``progress(texts, cached)`` is told the texts whose entries are ready: those found in a
    cache at once (``cached``), then those computed, one forward pass at a time."""
    out, missing, keys = _cached(engine, texts, disk, progress)
    if not missing:
        return out
    encoded = engine.encode(missing)
    embed = [k for k, (ids, _) in enumerate(encoded) if len(ids)]
    vectors = (engine.embed([encoded[k][0] for k in embed], device, batch_size,
                            _passed(missing, embed, progress)) if embed else [])
    _keep(engine, (missing, encoded, keys), dict(zip(embed, vectors, strict=True)), disk, out,
          progress)
    return out


def _cached(
    engine: _Engine,
    texts: Sequence[str],
    disk: _DiskCache | None,
    progress: Callable[[Sequence[str], bool], None] | None,
) -> tuple[dict[str, _Entry], list[str], dict[str, bytes]]:
    """The entries found in memory or on disk (``progress`` is told them), the texts found in
    neither, and the cache keys of the texts not found in memory."""
    out: dict[str, _Entry] = {}
    missing: list[str] = []
    keys: dict[str, bytes] = {}
    for text in texts:
        entry = _MEMORY.get((engine.namespace, text))
        if entry is not None:
            _STATS["memory_hits"] += 1
            out[text] = entry
        else:
            keys[text] = _text_key(engine.namespace, text)
    found_on_disk = (disk.load_many(engine.namespace, list(keys.values())) if disk is not None
                     else [None] * len(keys))
    for text, entry in zip(keys, found_on_disk, strict=True):
        if entry is not None:
            _STATS["disk_hits"] += 1
            _MEMORY.put((engine.namespace, text), entry)
            out[text] = entry
        else:
            missing.append(text)
    if progress is not None and out:
        progress(list(out), True)
    return out, missing, keys


def _passed(
    missing: Sequence[str],
    embed: Sequence[int],
    progress: Callable[[Sequence[str], bool], None] | None,
) -> Callable[[list[int]], None] | None:
    """What tells ``progress`` the texts of each forward pass (given as indices into
    ``embed``, the missing texts that have tokens)."""
    if progress is None:
        return None

    def passed(chunk: list[int]) -> None:
        progress([missing[embed[k]] for k in chunk], False)

    return passed


def _keep(
    engine: _Engine,
    work: tuple[Sequence[str], Sequence[tuple[np.ndarray, int]], Mapping[str, bytes]],
    vectors: Mapping[int, np.ndarray],
    disk: _DiskCache | None,
    out: dict[str, _Entry],
    progress: Callable[[Sequence[str], bool], None] | None,
) -> None:
    """The computed texts' entries into ``out``, memory and (in bulk: a few pack files, not a
    file per text) the disk cache. ``work`` is the missing texts, their encodings and keys;
    ``vectors`` the embeddings of those with tokens, by position."""
    missing, encoded, keys = work
    computed: list[tuple[bytes, _Entry]] = []
    for k, text in enumerate(missing):
        ids, full = encoded[k]
        entry = _Entry(ids, vectors.get(k), full)
        out[text] = entry
        _MEMORY.put((engine.namespace, text), entry)
        computed.append((keys[text], entry))
    if disk is not None:
        disk.store_many(engine, computed)
    if progress is not None and len(vectors) < len(missing):  # no tokens: nothing to run
        progress([text for k, text in enumerate(missing) if k not in vectors], False)


def clear_memory_cache() -> None:
    """Drop the embeddings kept in memory (the disk cache is untouched)."""
    _MEMORY.clear()
