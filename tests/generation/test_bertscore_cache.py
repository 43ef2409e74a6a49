"""BERTScore's disk cache of embeddings: pack files, written in bulk, read entry by entry, one
writer at a time, torn packs ignored (no model needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rageval.generation.bertscore import disk_cache
from rageval.generation.bertscore.disk_cache import _DiskCache
from rageval.generation.bertscore.entries import _Entry, _text_key
from rageval.generation.bertscore.packs import read_entry, read_index, write_pack
from rageval.generation.bertscore.progress import _STATS

NAMESPACE = "a" * 32
OTHER = "b" * 32


def _engine(namespace: str = NAMESPACE) -> SimpleNamespace:
    return SimpleNamespace(namespace=namespace, namespace_info={"model": namespace})


def _entry(i: int, tokens: int = 6, dim: int = 8) -> _Entry:
    """A known entry for text ``i``: readers can tell a right value from garbage."""
    emb = np.full((tokens, dim), float(i), dtype=np.float32) + np.arange(dim, dtype=np.float32)
    return _Entry(np.arange(tokens, dtype=np.int64) + i, emb, tokens + i % 3)


def _items(texts: range, namespace: str = NAMESPACE, **shape: int) -> list[tuple[bytes, _Entry]]:
    return [(_text_key(namespace, f"text {i}"), _entry(i, **shape)) for i in texts]


def _same(a: _Entry | None, b: _Entry) -> bool:
    return (a is not None and a.full_length == b.full_length and a.ids.dtype == np.int64
            and np.array_equal(a.ids, b.ids) and a.emb is not None and b.emb is not None
            and a.emb.dtype == np.float32 and a.emb.tobytes() == b.emb.tobytes())


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_pack_round_trip_and_lookup_by_key(tmp_path: Path) -> None:
    items = _items(range(50))
    _DiskCache(tmp_path).store_many(_engine(), items)
    reader = _DiskCache(tmp_path)  # another process
    keys = [*[key for key, _ in items][::-1], _text_key(NAMESPACE, "never stored")]
    found = reader.load_many(NAMESPACE, keys)
    assert all(_same(got, entry) for got, (_, entry) in zip(found, items[::-1], strict=False))
    assert found[-1] is None
    assert len(list(tmp_path.rglob("*.pack"))) == 1


def test_a_text_without_tokens_round_trips(tmp_path: Path) -> None:
    key = _text_key(NAMESPACE, "")
    _DiskCache(tmp_path).store_many(_engine(), [(key, _Entry(np.zeros(0, np.int64), None, 0))])
    got = _DiskCache(tmp_path).load(NAMESPACE, key)
    assert got is not None and got.emb is None and len(got.ids) == 0 and got.full_length == 0


@st.composite
def _entries(draw: st.DrawFn) -> _Entry:
    tokens = draw(st.integers(0, 24))
    dim = draw(st.integers(1, 12)) if tokens else 0
    ids = draw(hnp.arrays(np.int64, tokens, elements=st.integers(0, 2**31 - 1)))
    emb = (draw(hnp.arrays(np.float32, (tokens, dim), elements=st.floats(width=32)))
           if tokens else None)
    return _Entry(ids, emb, tokens + draw(st.integers(0, 1000)))


@settings(max_examples=60, deadline=None)
@given(st.lists(_entries(), min_size=1, max_size=6))
def test_serialisation_round_trips_every_entry_bit_for_bit(entries: list[_Entry]) -> None:
    items = [(_text_key(NAMESPACE, str(k)), entry) for k, entry in enumerate(entries)]
    with tempfile.TemporaryFile() as handle:
        size = write_pack(handle, items)
        handle.flush()
        assert os.fstat(handle.fileno()).st_size == size
        index = read_index(handle.fileno())
        assert index is not None and index.keys() == [key for key, _ in items]
        for row, (_, entry) in zip(index.rows, items, strict=True):
            got = read_entry(handle.fileno(), row)
            assert got is not None and got.full_length == entry.full_length
            assert got.ids.tobytes() == entry.ids.tobytes()
            assert (got.emb is None) == (entry.emb is None)
            if entry.emb is not None and got.emb is not None:
                assert got.emb.shape == entry.emb.shape
                assert got.emb.tobytes() == entry.emb.tobytes()


def test_another_namespace_never_hits(tmp_path: Path) -> None:
    items = _items(range(5))
    cache = _DiskCache(tmp_path)
    cache.store_many(_engine(), items)
    keys = [key for key, _ in items]
    assert cache.load_many(OTHER, keys) == [None] * 5  # another model or layer's directory
    other_keys = [key for key, _ in _items(range(5), OTHER)]
    assert cache.load_many(NAMESPACE, other_keys) == [None] * 5  # keys hash the namespace


def test_1200_texts_write_at_most_32_files(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk_cache, "_PACK_BYTES", 8 << 20)  # several packs, as a big step
    items = _items(range(1200), tokens=64, dim=96)  # some 30 MB
    _STATS.clear()
    for start in range(0, 1200, 400):  # three scoring steps
        _DiskCache(tmp_path).store_many(_engine(), items[start:start + 400])
    files = _files(tmp_path)
    assert len(files) <= 32, files
    assert _STATS["disk_writes"] == 1200 and _STATS["disk_packs"] == len(
        list(tmp_path.rglob("*.pack")))
    found = _DiskCache(tmp_path).load_many(NAMESPACE, [key for key, _ in items])
    assert all(_same(got, entry) for got, (_, entry) in zip(found, items, strict=True))


def test_a_torn_pack_is_ignored_then_removed_and_rebuilt(tmp_path: Path) -> None:
    items = _items(range(20))
    _DiskCache(tmp_path).store_many(_engine(), items)
    (pack,) = tmp_path.rglob("*.pack")
    pack.write_bytes(pack.read_bytes()[:-50])
    cache = _DiskCache(tmp_path)
    keys = [key for key, _ in items]
    _STATS.clear()
    assert cache.load_many(NAMESPACE, keys) == [None] * 20
    assert _STATS["disk_corrupt"] == 1
    cache.store_many(_engine(), items)  # what a run does with what it had to recompute
    assert not pack.exists()
    found = _DiskCache(tmp_path).load_many(NAMESPACE, keys)
    assert all(_same(got, entry) for got, (_, entry) in zip(found, items, strict=True))


def test_a_pack_damaged_after_it_was_indexed_is_forgotten(tmp_path: Path) -> None:
    items = _items(range(10))
    _DiskCache(tmp_path).store_many(_engine(), items)
    cache = _DiskCache(tmp_path)
    keys = [key for key, _ in items]
    assert all(entry is not None for entry in cache.load_many(NAMESPACE, keys))
    (pack,) = tmp_path.rglob("*.pack")
    pack.write_bytes(pack.read_bytes()[:100])
    assert cache.load_many(NAMESPACE, keys) == [None] * 10
    assert cache.load_many(NAMESPACE, keys) == [None] * 10  # not read again


def _child(script: str, root: Path) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        import sys, os, signal
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_bertscore_cache import _DiskCache, _engine, _items, disk_cache
        root = Path({str(root)!r})
    """) + textwrap.dedent(script)
    return subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)


def test_a_writer_killed_mid_pack_loses_only_that_pack(tmp_path: Path) -> None:
    _DiskCache(tmp_path).store_many(_engine(), _items(range(10)))
    child = _child("""
        real = disk_cache.write_pack
        def half_then_killed(handle, items):
            size = real(handle, items)
            handle.flush()
            handle.truncate(size // 2)
            os.kill(os.getpid(), signal.SIGKILL)
        disk_cache.write_pack = half_then_killed
        _DiskCache(root).store_many(_engine(), _items(range(10, 30)))
    """, tmp_path)
    assert child.wait(timeout=60) == -signal.SIGKILL, child.stderr.read()  # type: ignore[union-attr]
    left = [p for p in _files(tmp_path) if p.name.endswith(".tmp")]
    assert len(left) == 1 and len(list(tmp_path.rglob("*.pack"))) == 1
    cache = _DiskCache(tmp_path)
    keys = [key for key, _ in _items(range(30))]
    found = cache.load_many(NAMESPACE, keys)
    assert all(entry is not None for entry in found[:10]) and found[10:] == [None] * 20
    cache.store_many(_engine(), _items(range(10, 30)))  # the next run rebuilds them
    assert not left[0].exists()  # and removes what the dead writer left
    assert all(entry is not None for entry in _DiskCache(tmp_path).load_many(NAMESPACE, keys))


def test_readers_see_whole_entries_while_another_process_writes(tmp_path: Path) -> None:
    rounds, per_round = 25, 20
    writer = _child(f"""
        cache = _DiskCache(root)
        for r in range({rounds}):
            cache.store_many(_engine(), _items(range(r * {per_round}, (r + 1) * {per_round}),
                                               tokens=40, dim=64))
    """, tmp_path)
    items = _items(range(rounds * per_round), tokens=40, dim=64)
    keys = [key for key, _ in items]
    reader = _DiskCache(tmp_path)
    seen = 0
    while writer.poll() is None:
        found = reader.load_many(NAMESPACE, keys)
        hits = [(got, entry) for got, (_, entry) in zip(found, items, strict=True)
                if got is not None]
        assert all(_same(got, entry) for got, entry in hits)
        seen = max(seen, len(hits))
    assert writer.returncode == 0, writer.stderr.read()  # type: ignore[union-attr]
    found = reader.load_many(NAMESPACE, keys)
    assert all(_same(got, entry) for got, (_, entry) in zip(found, items, strict=True))


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    directory = tmp_path / NAMESPACE
    directory.mkdir()
    lock = os.open(directory / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another writer at work
    try:
        writer = _child("_DiskCache(root).store_many(_engine(), _items(range(5)))", tmp_path)
        time.sleep(1.5)
        assert writer.poll() is None and not list(tmp_path.rglob("*.pack"))
    finally:
        os.close(lock)
    assert writer.wait(timeout=60) == 0, writer.stderr.read()  # type: ignore[union-attr]
    assert len(list(tmp_path.rglob("*.pack"))) == 1
