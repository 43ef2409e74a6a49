"""The embedding cache on disk: pack files of many texts' embeddings per (model, layer), kept
across runs and looked up text by text.

The directory is ``$RAGEVAL_EMBEDDING_CACHE`` when set (``none`` disables the disk cache), else
``$RAGEVAL_CACHE_DIR/bertscore``, else ``~/.cache/rageval/bertscore``; the metric parameter
``cache`` (``auto``, ``none`` or a directory) overrides both for one metric.

Each (model, layer) has a directory, ``root/<namespace>/``, of pack files
(:mod:`~rageval.generation.bertscore.packs`): the texts a scoring step embeds are written
together as one pack (at most ``_PACK_BYTES`` each), never one file per text. A pack is written
to a temporary file and renamed into place while the writer holds the directory's lock
(``flock`` on ``lock``), so there is one writer at a time, readers (which take no lock) only
ever see whole packs, and a killed writer loses only the pack it was writing (the next writer
removes its temporary file). A pack that is torn or damaged anyway is ignored, and removed by
the next writer; its texts are recomputed. When a key is in several packs the newest wins.
Readers list the directory once per lookup of a batch of texts, so packs that other processes
wrote meanwhile are found.

The cache key covers the model (the bundled package and its version, a Hugging Face name and the
revision in the local hub cache, or a directory's file listing), the layer, the tokenizer's
truncation length, the transformers and torch versions, and the text. The device is not part of
the key, nor which kernels ran the linear layers (:mod:`~.cpu_layers`): embeddings computed on
a GPU are reused on a CPU (they differ at the level of float32 rounding only). Nothing is ever
evicted: delete the directory to reclaim space. The one-file-per-text entries (``.emb`` files
in two-letter subdirectories) of earlier versions are not read, nor migrated: those texts are
embedded again once, and the old subdirectories can be deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rageval.core.files import atomic_write, atomic_write_with, clean_stale_temporaries
from rageval.generation.bertscore.entries import _Entry
from rageval.generation.bertscore.packs import PACK_SUFFIX, read_entry, read_index, write_pack
from rageval.generation.bertscore.progress import _STATS

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: packs are still renamed into place whole
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from rageval.generation.bertscore.engine import _Engine

CACHE_ENV = "RAGEVAL_EMBEDDING_CACHE"
CACHE_ROOT_ENV = "RAGEVAL_CACHE_DIR"
_DISABLED = ("none", "off", "false", "no", "0")
# A scoring step's new entries are split into packs of about this size, so that a kill loses
# little and no single write holds a second copy of a very large step.
_PACK_BYTES = 256 << 20
_LOCK_NAME = "lock"


class _Namespace:
    """What one reader knows of a namespace directory: the packs it has indexed and, for every
    key, the newest pack and index row holding it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.seen: set[str] = set()  # pack names indexed (or found damaged)
        self.damaged: set[str] = set()
        self.where: dict[bytes, tuple[str, np.void]] = {}

    def refresh(self) -> None:
        """Index the packs written since the last look (by this or another process)."""
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.endswith(PACK_SUFFIX))
        except OSError:
            return
        for name in names:  # names sort oldest first: a newer pack's entries win
            if name in self.seen:
                continue
            self.seen.add(name)
            index = None
            with contextlib.suppress(OSError), _opened(self.directory / name) as fd:
                index = read_index(fd)
            if index is None:
                self.damaged.add(name)
                _STATS["disk_corrupt"] += 1
                continue
            for key, row in zip(index.keys(), index.rows, strict=True):
                self.where[key] = (name, row)

    def forget(self, name: str) -> None:
        """Stop reading a pack found damaged after it was indexed (its keys are recomputed)."""
        self.damaged.add(name)
        self.where = {key: hit for key, hit in self.where.items() if hit[0] != name}


class _DiskCache:
    """Pack files of entries under ``root/<namespace>/``, one writer at a time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._broken = False
        self._described: set[str] = set()
        self._namespaces: dict[str, _Namespace] = {}
        self._lock = threading.Lock()  # one thread of this process at a time

    def _namespace(self, namespace: str) -> _Namespace:
        if namespace not in self._namespaces:
            self._namespaces[namespace] = _Namespace(self.root / namespace)
        return self._namespaces[namespace]

    def load_many(self, namespace: str, keys: Sequence[bytes]) -> list[_Entry | None]:
        """Each key's entry, or None where no whole entry is cached."""
        with self._lock:
            space = self._namespace(namespace)
            space.refresh()
            found: list[_Entry | None] = [None] * len(keys)
            by_pack: dict[str, list[int]] = {}
            for k, key in enumerate(keys):
                hit = space.where.get(key)
                if hit is not None:
                    by_pack.setdefault(hit[0], []).append(k)
            for name, positions in by_pack.items():
                with contextlib.suppress(OSError), _opened(space.directory / name) as fd:
                    for k in positions:
                        found[k] = read_entry(fd, space.where[keys[k]][1])
                        if found[k] is not None:
                            continue
                        _STATS["disk_corrupt"] += 1
                        if read_index(fd) is None:  # the whole pack changed since it was read
                            space.forget(name)
                            break
            return found

    def load(self, namespace: str, key: bytes) -> _Entry | None:
        return self.load_many(namespace, [key])[0]

    def store_many(self, engine: _Engine, items: Sequence[tuple[bytes, _Entry]]) -> None:
        """Write ``items`` (key, entry) as packs, holding the directory's lock."""
        if self._broken or not items:
            return
        directory = self.root / engine.namespace
        try:
            with self._lock:
                directory.mkdir(parents=True, exist_ok=True)
                self._describe(engine)
                with _writer_lock(directory / _LOCK_NAME):
                    # what killed writers left: their temporary packs, and torn packs
                    clean_stale_temporaries(directory)
                    self._remove_damaged(engine.namespace)
                    for chunk in _chunks(items, _PACK_BYTES):
                        _write_pack_file(directory, chunk)
                        _STATS["disk_writes"] += len(chunk)
                        _STATS["disk_packs"] += 1
        except OSError as exc:
            self._broken = True
            warnings.warn(f"bertscore: the embedding cache {self.root} is not writable ({exc}); "
                          "going on without it", RuntimeWarning, stacklevel=2)

    def _remove_damaged(self, namespace: str) -> None:
        """Remove the packs found torn or damaged (only a writer, under the lock, removes)."""
        space = self._namespace(namespace)
        for name in sorted(space.damaged):
            with contextlib.suppress(FileNotFoundError):
                (space.directory / name).unlink()
            space.damaged.discard(name)

    def _describe(self, engine: _Engine) -> None:
        """A readable note of what a namespace directory holds (for people, not for lookups)."""
        if engine.namespace in self._described:
            return
        info = self.root / engine.namespace / "namespace.json"
        if not info.exists():
            _atomic_write(info, json.dumps(engine.namespace_info, indent=2,
                                           sort_keys=True).encode() + b"\n")
        self._described.add(engine.namespace)


def _chunks(items: Sequence[tuple[bytes, _Entry]],
            limit: int) -> Iterator[Sequence[tuple[bytes, _Entry]]]:
    start, size = 0, 0
    for k, (_, entry) in enumerate(items):
        if k > start and size + entry.nbytes > limit:
            yield items[start:k]
            start, size = k, 0
        size += entry.nbytes
    yield items[start:]


_serial = iter(range(1 << 62))


def _write_pack_file(directory: Path, items: Sequence[tuple[bytes, _Entry]]) -> Path:
    """One pack, written beside its name and renamed into place. Names sort by time of writing
    (nanoseconds, then the writer's process id and a counter)."""
    target = directory / f"{time.time_ns():016x}-{os.getpid()}-{next(_serial)}{PACK_SUFFIX}"
    return atomic_write_with(target, lambda handle: write_pack(handle, items))


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _writer_lock(path: Path) -> Iterator[None]:
    """The namespace's writer lock: an exclusive ``flock`` held while packs are written."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` beside ``path`` and rename it into place, creating the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)


def default_cache_dir() -> Path | None:
    """The disk cache directory ``cache=auto`` uses, or None when disabled by the environment."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit is not None and explicit.strip():
        if explicit.strip().lower() in _DISABLED:
            return None
        return Path(explicit).expanduser()
    root = os.environ.get(CACHE_ROOT_ENV)
    if root:
        return Path(root).expanduser() / "bertscore"
    return Path("~/.cache/rageval/bertscore").expanduser()


_DISKS: dict[Path, _DiskCache] = {}


def _disk_cache(setting: str) -> _DiskCache | None:
    if setting.strip().lower() in _DISABLED:
        return None
    root = default_cache_dir() if setting == "auto" else Path(setting).expanduser()
    if root is None:
        return None
    root = root.resolve()
    if root not in _DISKS:
        _DISKS[root] = _DiskCache(root)
    return _DISKS[root]
