"""The embedding cache on disk: one content-addressed file per (model, layer, text), kept
across runs.

The directory is ``$RAGEVAL_EMBEDDING_CACHE`` when set (``none`` disables the disk cache), else
``$RAGEVAL_CACHE_DIR/bertscore``, else ``~/.cache/rageval/bertscore``; the metric parameter
``cache`` (``auto``, ``none`` or a directory) overrides both for one metric.

Cache files are written to a temporary file and renamed into place (``os.replace``), so
concurrent runs and interrupted writes never leave a half-written entry under a real name; every
file carries its own key and a checksum, and a file that fails either check is ignored and
recomputed (see :mod:`~rageval.generation.bertscore.entries` for what an entry holds). Nothing
is ever evicted from the disk cache: delete the directory to reclaim space. The cache key covers
the model (the bundled package and its version, a Hugging Face name and the revision in the
local hub cache, or a directory's file listing), the layer, the tokenizer's truncation length,
the transformers and torch versions, and the text. The device is not part of the key, nor
which kernels ran the linear layers (:mod:`~.cpu_layers`): embeddings computed on a GPU are
reused on a CPU (they differ at the level of float32 rounding only).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from rageval.core.files import atomic_write
from rageval.generation.bertscore.entries import _deserialise, _Entry, _serialise
from rageval.generation.bertscore.progress import _STATS

if TYPE_CHECKING:
    from rageval.generation.bertscore.engine import _Engine

CACHE_ENV = "RAGEVAL_EMBEDDING_CACHE"
CACHE_ROOT_ENV = "RAGEVAL_CACHE_DIR"
_DISABLED = ("none", "off", "false", "no", "0")


class _DiskCache:
    """Content-addressed entry files under ``root/<namespace>/<xx>/<key>.emb``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._broken = False
        self._described: set[str] = set()

    def _path(self, namespace: str, key: bytes) -> Path:
        name = key.hex()
        return self.root / namespace / name[:2] / f"{name}.emb"

    def load(self, namespace: str, key: bytes) -> _Entry | None:
        path = self._path(namespace, key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        entry = _deserialise(key, data)
        if entry is None:
            _STATS["disk_corrupt"] += 1
        return entry

    def store(self, engine: _Engine, key: bytes, entry: _Entry) -> None:
        if self._broken:
            return
        path = self._path(engine.namespace, key)
        try:
            self._describe(engine)
            _atomic_write(path, _serialise(key, entry))
            _STATS["disk_writes"] += 1
        except OSError as exc:
            self._broken = True
            warnings.warn(f"bertscore: the embedding cache {self.root} is not writable ({exc}); "
                          "going on without it", RuntimeWarning, stacklevel=2)

    def _describe(self, engine: _Engine) -> None:
        """A readable note of what a namespace directory holds (for people, not for lookups)."""
        if engine.namespace in self._described:
            return
        info = self.root / engine.namespace / "namespace.json"
        if not info.exists():
            _atomic_write(info, json.dumps(engine.namespace_info, indent=2,
                                           sort_keys=True).encode() + b"\n")
        self._described.add(engine.namespace)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` beside ``path`` and rename it into place, creating the shard directory."""
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
