"""A content-addressed, crash-safe store of judge replies (SQLite in WAL mode).

Durability and sharing:

* each :meth:`JudgeCache.put` (and each :meth:`JudgeCache.put_many`, for the replies that
  arrived together) is one short transaction, committed before it returns, so a run killed at
  any point (even with SIGKILL) keeps every reply stored before it died (the WAL is synced at
  checkpoints, not per reply: an OS crash or power loss may lose the last few). A judge run
  stores what arrived together at most about 20 ms after it arrived (longer while the
  previous lot is handled): a run killed meanwhile loses that lot's replies;
* the database runs in WAL mode with a busy timeout, so two processes can share one file (one
  writer at a time, readers never blocked);
* only successful replies are stored; errors are never cached;
* API keys are never stored: they are not part of the key, and fields that look like credentials
  are dropped from request summaries before they are written.

The key and entry model is in :mod:`rageval.judge.llm.cache.entries`, the JSONL export format in
:mod:`rageval.judge.llm.cache.jsonl`; this module is the SQLite store.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from rageval.core.errors import InputError
from rageval.core.files import creatable
from rageval.judge.llm.cache.entries import (
    CACHE_KEY_VERSION,
    Entry,
    cache_key,
    cache_keys,
    canonical_json,
    new_entry,
)
from rageval.judge.llm.cache.jsonl import read_entries, write_entries

__all__ = ["CACHE_KEY_VERSION", "Entry", "JudgeCache", "NewReply", "cache_key", "cache_keys",
           "new_entry"]

_MEMORY = ":memory:"

#: One reply as :meth:`JudgeCache.put_many` takes it: (key, request summary, reply text, usage,
#: meta), the arguments of :meth:`JudgeCache.put`.
NewReply = tuple[str, Mapping[str, Any], str, Mapping[str, Any] | None, Mapping[str, Any] | None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key               TEXT PRIMARY KEY,
    model             TEXT,
    request           TEXT NOT NULL,
    reply             TEXT NOT NULL,
    usage             TEXT NOT NULL,
    meta              TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens      INTEGER NOT NULL DEFAULT 0,
    created           REAL NOT NULL
)
"""


class JudgeCache:
    """SQLite store of judge replies keyed by :func:`cache_key`.

    Safe for several threads (one connection behind a lock) and for several processes sharing
    one file (WAL mode, busy timeout, one short transaction per write). Use as a context manager
    or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._busy_timeout = busy_timeout
        self._in_memory = str(path) == _MEMORY
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if self._in_memory or self.path.exists():
            self._conn = self._connect()
        elif (problem := creatable(self.path.parent)) is not None:
            raise InputError(f"cannot create the cache: {problem}", path=str(self.path))
        # Otherwise the file is created with the first reply stored: a run that stores none
        # (it failed first, or an import was refused) leaves no empty cache behind.

    def _connect(self) -> sqlite3.Connection:
        """A connection to the cache file, created (with its directory) if need be."""
        path, busy_timeout = self.path, self._busy_timeout
        try:
            if not self._in_memory:
                path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the cache's directory: {exc.strerror or exc}",
                             path=str(path)) from None
        conn = None
        try:
            conn = sqlite3.connect(
                _MEMORY if self._in_memory else str(path),
                timeout=busy_timeout,
                isolation_level=None,  # autocommit; writes open their own short transactions
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal" and not self._in_memory:
                raise InputError(f"cannot switch the cache to WAL mode (got {mode!r})",
                                 path=str(path))
            # In WAL mode, NORMAL makes every commit durable against the process dying (SIGKILL
            # included: the commit is in the WAL file) and syncs only at checkpoints, so only
            # an OS crash or power loss can lose the last replies. FULL would fsync each reply
            # and cap a 64-wide judge at a few hundred replies per second.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(_SCHEMA)
            return conn
        except sqlite3.OperationalError as exc:
            _close(conn)
            raise InputError(f"cannot open the judge cache: {exc}", path=str(path)) from None
        except sqlite3.DatabaseError as exc:
            _close(conn)
            raise InputError(f"not a usable judge cache: {exc}", path=str(path)) from None
        except InputError:
            _close(conn)
            raise

    def _reader(self) -> sqlite3.Connection | None:
        """The connection to read through (lock held), None while there is no file yet
        (another process may create it meanwhile)."""
        if self._conn is None and self.path.exists():
            self._conn = self._connect()
        return self._conn

    def _writer(self) -> sqlite3.Connection:
        """The connection to write through (lock held), creating the file if need be."""
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str]) -> JudgeCache:
        """An in-memory cache holding a JSONL export (for replaying a shared run as it is,
        without creating a database file next to it)."""
        cache = cls(_MEMORY)
        cache.path = Path(path)
        cache.import_jsonl(path)
        return cache

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (every put is already committed)."""
        with self._lock:
            _close(self._conn)
            self._conn = None

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JudgeCache({str(self.path)!r})"

    def __len__(self) -> int:
        with self._lock:
            conn = self._reader()
            if conn is None:
                return 0
            return int(conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    # -- reads -----------------------------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        """The stored entry for ``key``, or ``None``."""
        with self._lock:
            conn = self._reader()
            if conn is None:
                return None
            row = conn.execute(
                "SELECT key, model, request, reply, usage, meta, created FROM entries "
                "WHERE key = ?",
                (key,),
            ).fetchone()
        return None if row is None else _entry(row)

    def get_many(self, keys: Iterable[str]) -> dict[str, Entry]:
        """The stored entries among ``keys`` (absent keys are left out), in a few queries."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Entry] = {}
        with self._lock:
            conn = self._reader()
            for i in range(0, len(wanted) if conn is not None else 0, 500):
                chunk = wanted[i : i + 500]
                marks = ",".join("?" * len(chunk))
                for row in conn.execute(  # type: ignore[union-attr]
                    "SELECT key, model, request, reply, usage, meta, created FROM entries "
                    f"WHERE key IN ({marks})", chunk
                ):
                    found[row[0]] = _entry(row)
        return found

    def missing(self, keys: Iterable[str]) -> list[str]:
        """The keys (first-seen order, without repeats) that the cache does not hold."""
        wanted = list(dict.fromkeys(keys))
        present: set[str] = set()
        with self._lock:
            conn = self._reader()
            for i in range(0, len(wanted) if conn is not None else 0, 500):
                chunk = wanted[i : i + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(  # type: ignore[union-attr]
                    f"SELECT key FROM entries WHERE key IN ({marks})", chunk
                ).fetchall()
                present.update(r[0] for r in rows)
        return [k for k in wanted if k not in present]

    def stats(self) -> dict[str, Any]:
        """Entries, entries by model, token totals, and size on disk (database + WAL) in bytes."""
        n = p = c = t = 0
        by_model: dict[str, int] = {}
        with self._lock:
            conn = self._reader()
            if conn is not None:
                n, p, c, t = conn.execute(
                    "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), "
                    "COALESCE(SUM(completion_tokens),0), COALESCE(SUM(total_tokens),0) "
                    "FROM entries").fetchone()
                by_model = {
                    (m if m is not None else ""): k
                    for m, k in conn.execute(
                        "SELECT model, COUNT(*) FROM entries GROUP BY model ORDER BY model"
                    ).fetchall()
                }
        size = 0
        for suffix in ("", "-wal"):
            f = Path(str(self.path) + suffix)
            if f.exists():
                size += f.stat().st_size
        return {
            "entries": int(n),
            "by_model": by_model,
            "prompt_tokens": int(p),
            "completion_tokens": int(c),
            "total_tokens": int(t),
            "size_bytes": size,
        }

    def newest_requests(self, limit: int) -> Iterator[str]:
        """The request summaries (JSON text) of the ``limit`` entries stored last, newest
        first, read a thousand at a time."""
        below = (1 << 63) - 1  # the largest rowid there can be: SQLite never hands it out
        while limit > 0:
            with self._lock:
                conn = self._reader()
                if conn is None:
                    return
                rows = conn.execute(
                    "SELECT rowid, request FROM entries WHERE rowid < ? "
                    "ORDER BY rowid DESC LIMIT ?", (below, min(limit, 1000))
                ).fetchall()
            if not rows:
                return
            limit -= len(rows)
            below = rows[-1][0]
            for _, request in rows:
                yield request

    def entries(self) -> list[Entry]:
        """Every entry, ordered by key."""
        with self._lock:
            conn = self._reader()
            keys = ([] if conn is None else
                    [r[0] for r in conn.execute("SELECT key FROM entries ORDER BY key")])
        out = []
        for k in keys:
            e = self.get(k)
            if e is not None:
                out.append(e)
        return out

    # -- writes ----------------------------------------------------------------------------

    def put(
        self,
        key: str,
        request_summary: Mapping[str, Any],
        reply_text: str,
        usage: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        *,
        replace: bool = False,
    ) -> bool:
        """Store one successful reply, committed before returning.

        Returns ``True`` when stored, ``False`` when the key was already present (the first
        stored reply wins, so a replay reproduces what was recorded first). ``replace=True``
        overwrites a stored reply instead (asking the judge again on purpose, ``--refresh``).
        Credential-looking fields in ``request_summary``/``meta`` are dropped.
        """
        entry = new_entry(key, request_summary, reply_text, usage, meta)
        return self._insert([entry], replace=replace) == 1

    def put_many(self, replies: Iterable[NewReply], *, replace: bool = False) -> int:
        """Store several successful replies (each ``(key, request_summary, reply_text, usage,
        meta)``, as :meth:`put` takes them) in one transaction, committed before returning;
        returns how many were stored.

        One commit for the lot: a judge storing its replies as they arrive commits whatever
        arrived since its last commit at once, instead of paying a transaction per reply.
        Stored in order, so the same rules hold as for puts one by one (the first stored reply
        of a key wins, or with ``replace=True`` the last one). Every reply is validated before
        anything is written: a bad one raises and then none is stored.
        """
        entries = [new_entry(*reply) for reply in replies]
        return self._insert(entries, replace=replace) if entries else 0

    def _insert(self, entries: list[Entry], *, replace: bool = False) -> int:
        rows = [
            (
                e.key,
                e.model,
                canonical_json(e.request),
                e.reply_text,
                canonical_json(e.usage),
                canonical_json(e.meta),
                e.usage.get("prompt_tokens", 0),
                e.usage.get("completion_tokens", 0),
                e.usage.get("total_tokens", 0),
                e.created,
            )
            for e in entries
        ]
        verb = "REPLACE" if replace else "IGNORE"
        with self._lock:
            conn = self._writer()
            before = conn.total_changes
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    f"INSERT OR {verb} INTO entries (key, model, request, reply, usage, meta, "
                    "prompt_tokens, completion_tokens, total_tokens, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return conn.total_changes - before

    # -- exchange --------------------------------------------------------------------------

    def export_jsonl(self, path_or_file: str | os.PathLike[str] | IO[str]) -> int:
        """Write every entry as one JSON object per line, ordered by key; returns the count."""
        return write_entries(self.entries(), path_or_file)

    def import_jsonl(self, path: str | os.PathLike[str]) -> dict[str, int]:
        """Load entries exported by :meth:`export_jsonl`.

        Every line is validated before anything is written; a bad line raises
        :class:`~rageval.core.errors.InputError` naming the file, the line and the field, and then
        nothing is imported. Importing is idempotent: keys already present are kept as they are.
        Returns ``{"read": lines read, "added": entries newly stored}``.
        """
        entries = read_entries(path)
        added = self._insert(entries) if entries else 0
        return {"read": len(entries), "added": added}


def _close(conn: sqlite3.Connection | None) -> None:
    if conn is not None:
        conn.close()


def _entry(row: tuple[Any, ...]) -> Entry:
    """An entry from a row of (key, model, request, reply, usage, meta, created)."""
    return Entry(key=row[0], model=row[1], request=json.loads(row[2]), reply_text=row[3],
                 usage=json.loads(row[4]), meta=json.loads(row[5]), created=row[6])
