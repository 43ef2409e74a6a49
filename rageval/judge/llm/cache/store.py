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

Looking replies up: each reply is stored with its request's id (the key of the same request
with no response format, see :mod:`rageval.judge.llm.cache.entries`), indexed, so that
:meth:`JudgeCache.lookup` finds a request's reply with one probe whatever wire format produced
it, and reads only what a replay uses of it. A cache written by an earlier version gains the
column when it is opened; its replies, stored without an id, are found under each of their
keys as before, and get their id the first time a run finds them so (``backfill``). An earlier
version reading or writing the same file ignores the column.

The key and entry model is in :mod:`rageval.judge.llm.cache.entries`, the JSONL export format in
:mod:`rageval.judge.llm.cache.jsonl`; this module is the SQLite store.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

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

__all__ = ["CACHE_KEY_VERSION", "Entry", "JudgeCache", "NewReply", "Request", "Stored",
           "cache_key", "cache_keys", "new_entry"]

_MEMORY = ":memory:"

#: One reply as :meth:`JudgeCache.put_many` takes it: (key, request summary, reply text, usage,
#: meta), the arguments of :meth:`JudgeCache.put`, and optionally the request's id last.
NewReply = (tuple[str, Mapping[str, Any], str, Mapping[str, Any] | None, Mapping[str, Any] | None]
            | tuple[str, Mapping[str, Any], str, Mapping[str, Any] | None,
                    Mapping[str, Any] | None, str | None])

#: One request as :meth:`JudgeCache.lookup` takes it: its id (None: not known) and its keys, in
#: the order of preference (the run's ladder of wire formats).
Request = tuple[str | None, Sequence[str]]

_CHUNK = 5000  # keys or ids per query of a lookup (SQLite takes 32,766 since 3.32)


class Stored(NamedTuple):
    """What a replay reads of a stored reply: the key it was found under, the reply, its
    usage and meta, and the endpoint of the request summary (the rest of it is not read)."""

    key: str
    reply_text: str
    usage: dict[str, int]
    meta: dict[str, Any]
    endpoint: str | None

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
    created           REAL NOT NULL,
    request_id        TEXT
)
"""
# What a cache written by an earlier version gains when opened (see the module).
_ADD_REQUEST_ID = "ALTER TABLE entries ADD COLUMN request_id TEXT"
_REQUEST_ID_INDEX = ("CREATE INDEX IF NOT EXISTS entries_request_id ON entries (request_id, key) "
                     "WHERE request_id IS NOT NULL")
# The replies stored without an id (a lookup asks whether there are any).
_LEGACY_INDEX = ("CREATE INDEX IF NOT EXISTS entries_legacy ON entries (request_id) "
                 "WHERE request_id IS NULL")


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
        # Whether the file has the request id column (a read-only file written by an earlier
        # version has not: its replies are looked up by key alone), and how a lookup reads a
        # request summary's endpoint (set when the file is opened).
        self._ids = False
        self._endpoint = _ENDPOINT_SQL
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
            self._ids = _with_request_ids(conn)
            self._endpoint = _endpoint_sql(conn)
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
            row = conn.execute(f"SELECT {self._columns()} FROM entries WHERE key = ?",
                               (key,)).fetchone()
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
                    f"SELECT {self._columns()} FROM entries WHERE key IN ({marks})", chunk
                ):
                    found[row[0]] = _entry(row)
        return found

    def _columns(self) -> str:
        """The columns :func:`_entry` reads, in its order."""
        return ("key, model, request, reply, usage, meta, created, "
                + ("request_id" if self._ids else "NULL"))

    def lookup(self, requests: Sequence[Request], *,
               backfill: bool = False) -> list[Stored | None]:
        """For each request (by position), its reply under the first of its keys that the
        cache holds (None: under none of them), read in a few queries: by the requests' ids,
        then by every key of those that no id found. ``backfill``: the replies found by key
        alone are given the id of their request (in one transaction; not when the file
        cannot be written)."""
        rows = self._lookup(requests, True, backfill)
        return [None if row is None else _stored(row, self._endpoint) for row in rows]

    def find(self, requests: Sequence[Request], *, backfill: bool = False) -> list[str | None]:
        """For each request, the first of its keys that the cache holds (None: none of them),
        as :meth:`lookup` finds it, reading no reply."""
        return [None if row is None else row[0]
                for row in self._lookup(requests, False, backfill)]

    def _lookup(self, requests: Sequence[Request], read: bool,
                backfill: bool) -> list[tuple[Any, ...] | None]:
        """:meth:`lookup`'s rows for each request found: (key, reply, usage, meta, endpoint)
        when ``read``, else (key,)."""
        out: list[tuple[Any, ...] | None] = [None] * len(requests)
        with self._lock:
            conn = self._reader()
            if conn is None or not requests:
                return out
            columns = f"key, reply, usage, meta, {self._endpoint}" if read else "key"
            by_id = self._by_id(conn, requests, columns) if self._ids else {}
            # A reply stored without an id (see the module) may sit under a key the run
            # prefers to the one its id found: those keys are looked up as well.
            legacy = self._ids and bool(by_id) and _has_legacy(conn)
            later: list[int] = []
            for i, (rid, keys) in enumerate(requests):
                rows = by_id.get(rid) if rid is not None else None
                if rows:
                    at = next((n for n, key in enumerate(keys) if key in rows), None)
                    if at is not None:
                        out[i] = rows[keys[at]]
                        if not (legacy and at > 0):
                            continue
                later.append(i)
            if later:
                self._by_key(conn, requests, later, columns, out, backfill and self._ids)
        return out

    def _by_id(self, conn: sqlite3.Connection, requests: Sequence[Request],
               columns: str) -> dict[str, dict[str, tuple[Any, ...]]]:
        """The rows stored with the requests' ids: id -> key -> (key, *fields)."""
        ids = list(dict.fromkeys(rid for rid, _ in requests if rid is not None))
        by_id: dict[str, dict[str, tuple[Any, ...]]] = {}
        for row in _select(conn, f"request_id, {columns}", "request_id", ids):
            by_id.setdefault(row[0], {})[row[1]] = row[1:]
        return by_id

    def _by_key(self, conn: sqlite3.Connection, requests: Sequence[Request], which: list[int],
                columns: str, out: list[tuple[Any, ...] | None], backfill: bool) -> None:
        """The requests at ``which`` looked up under each of their keys (the first found
        wins, as the first of a request's keys wins over its id's row); ``backfill``: the
        rows found without an id get their request's."""
        wanted = list(dict.fromkeys(key for i in which for key in requests[i][1]))
        by_key = {row[0]: row for row in _select(conn, columns, "key", wanted)}
        named: list[tuple[str, str]] = []
        for i in which:
            rid, keys = requests[i]
            hit = next((by_key[key] for key in keys if key in by_key), None)
            if hit is None:
                continue
            if out[i] is None or out[i][0] != hit[0]:  # type: ignore[index]
                out[i] = hit
                if rid is not None:
                    named.append((rid, hit[0]))
        if backfill and named:
            _backfill(conn, named)

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
                e.request_id,
            )
            for e in entries
        ]
        verb = "REPLACE" if replace else "IGNORE"
        with self._lock:
            conn = self._writer()
            ids = self._ids  # known once the file is open
            before = conn.total_changes
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    f"INSERT OR {verb} INTO entries (key, model, request, reply, usage, meta, "
                    "prompt_tokens, completion_tokens, total_tokens, created"
                    + (", request_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" if ids else
                       ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                    rows if ids else [row[:-1] for row in rows],
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
    """An entry from a row of (key, model, request, reply, usage, meta, created,
    request_id)."""
    return Entry(key=row[0], model=row[1], request=json.loads(row[2]), reply_text=row[3],
                 usage=json.loads(row[4]), meta=json.loads(row[5]), created=row[6],
                 request_id=row[7])


# A request summary's endpoint read by SQLite (where it has JSON functions; else the summary
# is read whole, see _endpoint_sql): decoding every summary in Python took a tenth of a replay.
_ENDPOINT_SQL = "json_extract(request, '$.endpoint')"


def _endpoint_sql(conn: sqlite3.Connection) -> str:
    """What a lookup selects for the endpoint: :data:`_ENDPOINT_SQL`, or the whole summary
    where SQLite has no JSON functions."""
    try:
        conn.execute("SELECT json_extract('{}', '$.endpoint')").fetchone()
    except sqlite3.OperationalError:
        return "request"
    return _ENDPOINT_SQL


def _stored(row: tuple[Any, ...], endpoint_sql: str) -> Stored:
    """A :class:`Stored` of a lookup's row (key, reply, usage, meta, endpoint)."""
    endpoint = row[4]
    if endpoint_sql != _ENDPOINT_SQL:  # the whole summary
        endpoint = json.loads(endpoint).get("endpoint")
    return Stored(row[0], row[1], stored_json(row[2]), stored_json(row[3]),
                  endpoint if endpoint is None or isinstance(endpoint, str) else str(endpoint))


_SCAN = json.JSONDecoder().scan_once


def stored_json(text: Any) -> Any:
    """``json.loads(text)`` of a JSON column: the decoder's scanner alone where it reads the
    whole text (what the cache writes: no space around the value), which skips the layers
    ``json.loads`` goes through for each of a replay's two documents per reply; ``json.loads``
    itself for anything else (and its errors)."""
    if type(text) is str:
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:
            return json.loads(text)
        if end == len(text):
            return value
    return json.loads(text)


def _select(conn: sqlite3.Connection, columns: str, column: str,
            values: list[str]) -> Iterator[tuple[Any, ...]]:
    """The rows whose ``column`` is one of ``values``, a few thousand values a query (no more
    than this SQLite binds: 999 before 3.32, which some systems' Pythons still link)."""
    size = min(_CHUNK, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    for i in range(0, len(values), size):
        chunk = values[i : i + size]
        marks = ",".join("?" * len(chunk))
        yield from conn.execute(f"SELECT {columns} FROM entries WHERE {column} IN ({marks})",
                                chunk).fetchall()


def _with_request_ids(conn: sqlite3.Connection) -> bool:
    """Whether the cache has the request id column and its index, added where missing (a
    cache written by an earlier version); False when the file cannot be changed (read-only):
    lookups then go by key alone."""
    try:
        if not _has_request_ids(conn):
            conn.execute("BEGIN IMMEDIATE")  # another process may be adding them too
            try:
                columns = {row[1] for row in conn.execute("PRAGMA table_info(entries)")}
                if "request_id" not in columns:
                    conn.execute(_ADD_REQUEST_ID)
                conn.execute(_REQUEST_ID_INDEX)
                conn.execute(_LEGACY_INDEX)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
    except sqlite3.OperationalError:
        return False
    return True


def _has_request_ids(conn: sqlite3.Connection) -> bool:
    names = {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'entries'")}
    return {"entries_request_id", "entries_legacy"} <= names


def _has_legacy(conn: sqlite3.Connection) -> bool:
    """Whether some reply is stored without a request id (read from its own index)."""
    return conn.execute(
        "SELECT 1 FROM entries WHERE request_id IS NULL LIMIT 1").fetchone() is not None


def _backfill(conn: sqlite3.Connection, named: list[tuple[str, str]]) -> None:
    """Give the replies stored without an id (by key) their request's id, in one
    transaction; nothing when the file cannot be written."""
    # The ids only spare a later replay its lookups by key: a read-only file, or one another
    # process holds past the busy timeout, is left as it is, and the next replay tries again.
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("UPDATE entries SET request_id = ? "
                             "WHERE key = ? AND request_id IS NULL", named)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
