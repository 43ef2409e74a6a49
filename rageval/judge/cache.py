"""A content-addressed, crash-safe store of judge replies (SQLite in WAL mode).

Every judge reply is stored under :func:`cache_key`, the SHA-256 of a canonical JSON document of
everything that can change the reply: the model, the messages, every sampling parameter, the
response format and the sample index. A replay run looks replies up by key and never calls the
network; :meth:`JudgeCache.missing` lists what a replay would lack.

Durability and sharing:

* each :meth:`JudgeCache.put` is its own short transaction, committed before it returns, so a run
  killed at any point (even with SIGKILL) keeps every reply stored before it died (the WAL is
  synced at checkpoints, not per reply: an OS crash or power loss may lose the last few);
* the database runs in WAL mode with a busy timeout, so two processes can share one file (one
  writer at a time, readers never blocked);
* only successful replies are stored; errors are never cached;
* API keys are never stored: they are not part of the key, and fields that look like credentials
  are dropped from request summaries before they are written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rageval.core.errors import InputError, UsageError

__all__ = ["CACHE_KEY_VERSION", "Entry", "JudgeCache", "cache_key", "cache_keys"]

#: Part of every key: bump it when the canonical form changes, so old entries are never misread.
CACHE_KEY_VERSION = "rageval-judge-cache/1"

_SECRET_FIELD = re.compile(r"api[_-]?key|authorization|secret|password|token$", re.IGNORECASE)
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")
_MEMORY = ":memory:"

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


def _canonical(obj: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept, NaN refused."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _check_no_secret(obj: Any, where: str) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if isinstance(k, str) and _SECRET_FIELD.search(k) and k not in _USAGE_FIELDS:
                raise UsageError(f"{where} must not contain credentials (field '{k}')")
            _check_no_secret(v, where)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _check_no_secret(v, where)


def _scrub(obj: Any) -> Any:
    """Drop credential-looking fields (api_key, authorization, ...) at any depth."""
    if isinstance(obj, Mapping):
        return {
            k: _scrub(v)
            for k, v in obj.items()
            if not (isinstance(k, str) and _SECRET_FIELD.search(k) and k not in _USAGE_FIELDS)
        }
    if isinstance(obj, list | tuple):
        return [_scrub(v) for v in obj]
    return obj


def cache_key(
    model: str,
    messages: Iterable[Mapping[str, Any]],
    params: Mapping[str, Any] | None = None,
    response_format: Mapping[str, Any] | None = None,
    sample_index: int = 0,
) -> str:
    """The cache key of one judge request: hex SHA-256 of a canonical JSON of its inputs.

    ``params`` holds every sampling parameter sent (temperature, seed, top_p, max_tokens, ...);
    parameters whose value is ``None`` are not sent and so are left out of the key. Credentials
    are not part of a request's content: a ``params`` field that looks like one is refused.
    """
    return next(iter(cache_keys(model, messages, params, {"": response_format},
                                sample_index).values()))


def cache_keys(
    model: str,
    messages: Iterable[Mapping[str, Any]],
    params: Mapping[str, Any] | None,
    response_formats: Mapping[str, Mapping[str, Any] | None],
    sample_index: int = 0,
) -> dict[str, str]:
    """The keys of one request sent under each of several response formats (name -> key),
    each equal to :func:`cache_key` of that format; the shared part is encoded and hashed once.
    """
    if not isinstance(model, str) or not model:
        raise UsageError("cache_key: model must be a non-empty string")
    if isinstance(sample_index, bool) or not isinstance(sample_index, int) or sample_index < 0:
        raise UsageError("cache_key: sample_index must be a non-negative integer")
    params = {k: v for k, v in (params or {}).items() if v is not None}
    _check_no_secret(params, "cache_key params")
    try:
        # The canonical document's keys in sorted order: messages, model, params,
        # response_format, sample_index, v. Everything before response_format is shared.
        head = (f'{{"messages":{_canonical([dict(m) for m in messages])},'
                f'"model":{_canonical(model)},"params":{_canonical(params)},'
                '"response_format":')
        tail = f',"sample_index":{sample_index},"v":{_canonical(CACHE_KEY_VERSION)}}}'
        shared = hashlib.sha256(head.encode("utf-8"))
        keys = {}
        for name, fmt in response_formats.items():
            digest = shared.copy()
            digest.update((_canonical(dict(fmt) if fmt is not None else None) + tail)
                          .encode("utf-8"))
            keys[name] = digest.hexdigest()
    except (TypeError, ValueError) as exc:
        raise UsageError(f"cache_key: request is not JSON-serialisable: {exc}") from None
    return keys


@dataclass(frozen=True)
class Entry:
    """One stored reply."""

    key: str
    model: str | None
    request: dict[str, Any]
    reply_text: str
    usage: dict[str, int]
    meta: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The JSON object written by :meth:`JudgeCache.export_jsonl`."""
        return {
            "key": self.key,
            "model": self.model,
            "request": self.request,
            "reply": self.reply_text,
            "usage": self.usage,
            "meta": self.meta,
            "created": self.created,
        }


def _clean_usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in (usage or {}).items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise UsageError(f"usage field '{k}' must be a non-negative integer, got {v!r}")
        out[str(k)] = v
    return out


class JudgeCache:
    """SQLite store of judge replies keyed by :func:`cache_key`.

    Safe for several threads (one connection behind a lock) and for several processes sharing
    one file (WAL mode, busy timeout, one short transaction per write). Use as a context manager
    or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        in_memory = str(path) == _MEMORY
        self._lock = threading.Lock()
        try:
            if not in_memory:
                self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the cache's directory: {exc.strerror or exc}",
                             path=str(self.path)) from None
        try:
            self._conn = sqlite3.connect(
                str(path),
                timeout=busy_timeout,
                isolation_level=None,  # autocommit; writes open their own short transactions
                check_same_thread=False,
            )
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal" and not in_memory:
                raise InputError(
                    f"cannot switch the cache to WAL mode (got {mode!r})", path=str(self.path)
                )
            # In WAL mode, NORMAL makes every commit durable against the process dying (SIGKILL
            # included: the commit is in the WAL file) and syncs only at checkpoints, so only
            # an OS crash or power loss can lose the last replies. FULL would fsync each reply
            # and cap a 64-wide judge at a few hundred replies per second.
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute(_SCHEMA)
        except sqlite3.OperationalError as exc:
            raise InputError(f"cannot open the judge cache: {exc}", path=str(self.path)) from None
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a usable judge cache: {exc}", path=str(self.path)) from None

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
            self._conn.close()

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JudgeCache({str(self.path)!r})"

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    # -- reads -----------------------------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        """The stored entry for ``key``, or ``None``."""
        with self._lock:
            row = self._conn.execute(
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
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                marks = ",".join("?" * len(chunk))
                for row in self._conn.execute(
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
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key FROM entries WHERE key IN ({marks})", chunk
                ).fetchall()
                present.update(r[0] for r in rows)
        return [k for k in wanted if k not in present]

    def stats(self) -> dict[str, Any]:
        """Entries, entries by model, token totals, and size on disk (database + WAL) in bytes."""
        with self._lock:
            n, p, c, t = self._conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), "
                "COALESCE(SUM(completion_tokens),0), COALESCE(SUM(total_tokens),0) FROM entries"
            ).fetchone()
            by_model = {
                (m if m is not None else ""): k
                for m, k in self._conn.execute(
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

    def entries(self) -> list[Entry]:
        """Every entry, ordered by key."""
        with self._lock:
            keys = [r[0] for r in self._conn.execute("SELECT key FROM entries ORDER BY key")]
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
        if not isinstance(key, str) or not _KEY_RE.match(key):
            raise UsageError(f"cache key must be a 64-digit lowercase hex SHA-256, got {key!r}")
        if not isinstance(reply_text, str):
            raise UsageError("reply_text must be a string (errors are never cached)")
        entry = Entry(
            key=key,
            model=request_summary.get("model") if isinstance(request_summary, Mapping) else None,
            request=_scrub(dict(request_summary)),
            reply_text=reply_text,
            usage=_clean_usage(usage),
            meta=_scrub(dict(meta or {})),
            created=time.time(),
        )
        return self._insert([entry], replace=replace) == 1

    def _insert(self, entries: list[Entry], *, replace: bool = False) -> int:
        rows = [
            (
                e.key,
                e.model,
                _canonical(e.request),
                e.reply_text,
                _canonical(e.usage),
                _canonical(e.meta),
                e.usage.get("prompt_tokens", 0),
                e.usage.get("completion_tokens", 0),
                e.usage.get("total_tokens", 0),
                e.created,
            )
            for e in entries
        ]
        verb = "REPLACE" if replace else "IGNORE"
        with self._lock:
            before = self._conn.total_changes
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    f"INSERT OR {verb} INTO entries (key, model, request, reply, usage, meta, "
                    "prompt_tokens, completion_tokens, total_tokens, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return self._conn.total_changes - before

    # -- exchange --------------------------------------------------------------------------

    def export_jsonl(self, path_or_file: str | os.PathLike[str] | IO[str]) -> int:
        """Write every entry as one JSON object per line, ordered by key; returns the count."""
        entries = self.entries()
        lines = [_canonical(e.to_json()) + "\n" for e in entries]
        if hasattr(path_or_file, "write"):
            fh: Any = path_or_file
            fh.writelines(lines)
        else:
            with open(path_or_file, "w", encoding="utf-8") as out:  # type: ignore[arg-type]
                out.writelines(lines)
        return len(lines)

    def import_jsonl(self, path: str | os.PathLike[str]) -> dict[str, int]:
        """Load entries exported by :meth:`export_jsonl`.

        Every line is validated before anything is written; a bad line raises
        :class:`~rageval.core.errors.InputError` naming the file, the line and the field, and then
        nothing is imported. Importing is idempotent: keys already present are kept as they are.
        Returns ``{"read": lines read, "added": entries newly stored}``.
        """
        src = str(path)
        entries: list[Entry] = []
        try:
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", path=src) from None
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text: {exc.reason}", path=src) from None
        for lineno, raw in enumerate(lines, start=1):
            if raw.strip():
                entries.append(_parse_line(raw, src, lineno))
        added = self._insert(entries) if entries else 0
        return {"read": len(entries), "added": added}


def _entry(row: tuple[Any, ...]) -> Entry:
    """An entry from a row of (key, model, request, reply, usage, meta, created)."""
    return Entry(key=row[0], model=row[1], request=json.loads(row[2]), reply_text=row[3],
                 usage=json.loads(row[4]), meta=json.loads(row[5]), created=row[6])


def _parse_line(raw: str, src: str, lineno: int) -> Entry:
    def bad(msg: str, fld: str | None = None) -> InputError:
        return InputError(msg, path=src, line=lineno, field=fld)

    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise bad("expected a JSON object")
    key = obj.get("key")
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise bad("must be a 64-digit lowercase hex SHA-256", "key")
    reply = obj.get("reply")
    if not isinstance(reply, str):
        raise bad("must be a string", "reply")
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("must be a string or null", "model")
    request = obj.get("request", {})
    if not isinstance(request, dict):
        raise bad("must be an object", "request")
    meta = obj.get("meta", {})
    if not isinstance(meta, dict):
        raise bad("must be an object", "meta")
    usage = obj.get("usage", {})
    if not isinstance(usage, dict):
        raise bad("must be an object", "usage")
    for k, v in usage.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad(f"'{k}' must be a non-negative integer", "usage")
    created = obj.get("created", 0.0)
    if isinstance(created, bool) or not isinstance(created, int | float):
        raise bad("must be a number", "created")
    return Entry(
        key=key,
        model=model,
        request=_scrub(request),
        reply_text=reply,
        usage=dict(usage),
        meta=_scrub(meta),
        created=float(created),
    )
