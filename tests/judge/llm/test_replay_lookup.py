"""A replay looks each request up once, by its id, whatever wire format produced its reply;
caches written before ids were stored still open, replay identically and get ids; each request
is rendered once per replay."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.core.errors import InputError
from rageval.core.records import Record, records_from_dicts
from rageval.judge.llm.cache import store
from rageval.judge.llm.cache.entries import cache_key, encode_format, keys_and_request_id
from rageval.judge.llm.cache.store import JudgeCache
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.units import make_unit
from rageval.judge.rubric import metric as rubric_metric

METRICS = ["judge:faithfulness", "judge:correctness"]

# The entries table as rageval wrote it before replies were stored with their request's id.
OLD_SCHEMA = """
CREATE TABLE entries (
    key TEXT PRIMARY KEY, model TEXT, request TEXT NOT NULL, reply TEXT NOT NULL,
    usage TEXT NOT NULL, meta TEXT NOT NULL, prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0, total_tokens INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL)
"""
OLD_COLUMNS = ("key, model, request, reply, usage, meta, prompt_tokens, completion_tokens, "
               "total_tokens, created")


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


def records(n: int = 5) -> list[Record]:
    return records_from_dicts([
        {"id": f"q{i}", "query": f"Who wrote book {i}?",
         "contexts": [{"id": f"d{i}", "text": f"Book {i} was written by author {i}."}],
         "answer": f"Author {i} wrote it.", "reference": f"Author {i}."}
        for i in range(n)])


def options(cache: Path, server: JudgeServer | None = None, **kw: Any) -> JudgeOptions:
    return JudgeOptions(model="judge-model", cache=str(cache), timeout=5.0, max_retries=1,
                        base_url=server.base_url if server else "http://127.0.0.1:9/v1",
                        offline=server is None, **kw)


def outcome(result: Any) -> tuple[Any, ...]:
    """What a replay gives: values, details, signatures and the manifest's cache counts."""
    summary = result.summary
    return (json.dumps([r.to_json() if hasattr(r, "to_json") else r for r in result.records],
                       sort_keys=True, default=str),
            {name: (s.value, str(s.signature)) for name, s in summary.items()},
            {k: v for k, v in result.manifest["judge"]["cache"].items() if k != "path"},
            result.manifest["judge"]["response_format"])


def fill(tmp_path: Path, server: JudgeServer) -> tuple[Path, Any]:
    """A cache filled by an online run against an endpoint refusing both schema-carrying
    formats: every reply is stored under a fallback format (``json_object``)."""
    server.refuse = {"json_schema": 400, "json_object+schema": 400}
    cache = tmp_path / "cache.sqlite"
    online = evaluate(records(), METRICS, judge=options(cache, server), bootstrap=10)
    assert online.manifest["judge"]["response_format"]["used"] == {"json_object": 10}
    return cache, online


def old_copy(cache: Path, to: Path) -> Path:
    """``cache``'s replies in a file of the schema before request ids."""
    with sqlite3.connect(cache) as src, sqlite3.connect(to) as dst:
        dst.execute(OLD_SCHEMA)
        dst.executemany(f"INSERT INTO entries ({OLD_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        src.execute(f"SELECT {OLD_COLUMNS} FROM entries").fetchall())
    return to


@pytest.fixture
def selects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every lookup query of the cache: (the column it looks up by, how many values)."""
    seen: list[tuple[str, int]] = []
    real = store._select

    def counted(conn: sqlite3.Connection, columns: str, column: str,
                values: list[str]) -> Iterator[tuple[Any, ...]]:
        seen.append((column, len(values)))
        return real(conn, columns, column, values)

    monkeypatch.setattr(store, "_select", counted)
    return seen


def test_a_reply_of_a_fallback_format_is_found_by_its_id_alone(
        tmp_path: Path, server: JudgeServer, selects: list[tuple[str, int]]) -> None:
    cache, online = fill(tmp_path, server)
    selects.clear()
    replay = evaluate(records(), METRICS, judge=options(cache), bootstrap=10)
    # One id per request, read once: the check before scoring reads the replies and hands
    # them to the scoring; no key is looked up.
    assert selects == [("request_id", 10)]
    assert replay.manifest["judge"]["cache"]["hits"] == 10
    assert replay.manifest["judge"]["response_format"]["used"] == {"json_object": 10}
    assert [r.to_json()["scores"] for r in replay.records] == \
        [r.to_json()["scores"] for r in online.records]


def test_an_old_cache_replays_identically_and_gets_ids(
        tmp_path: Path, server: JudgeServer, selects: list[tuple[str, int]]) -> None:
    cache, _ = fill(tmp_path, server)
    old = old_copy(cache, tmp_path / "old.sqlite")
    new = evaluate(records(), METRICS, judge=options(cache), bootstrap=10)
    selects.clear()
    replayed = evaluate(records(), METRICS, judge=options(old), bootstrap=10)
    assert outcome(replayed) == outcome(new)
    assert ("key", 40) in selects  # found under each of the four keys of `auto`
    with sqlite3.connect(old) as conn:  # the column added, every reply given its id
        assert conn.execute("SELECT COUNT(*), COUNT(request_id) FROM entries").fetchone() \
            == (10, 10)
    selects.clear()
    again = evaluate(records(), METRICS, judge=options(old), bootstrap=10)
    assert selects == [("request_id", 10)]
    assert outcome(again) == outcome(new)


def test_an_old_cache_gets_new_replies_and_an_earlier_version_still_writes(
        tmp_path: Path, server: JudgeServer) -> None:
    cache, _ = fill(tmp_path, server)
    old = old_copy(cache, tmp_path / "old.sqlite")
    with sqlite3.connect(old) as conn:  # half of it, as an earlier version left it
        conn.execute("DELETE FROM entries WHERE rowid % 2 = 0")
    online = evaluate(records(), METRICS, judge=options(old, server), bootstrap=10)
    assert online.manifest["judge"]["cache"]["stored"] == 5
    with sqlite3.connect(old) as conn:
        # An earlier version writes with the columns it knows, beside the new one.
        row = conn.execute(f"SELECT {OLD_COLUMNS} FROM entries LIMIT 1").fetchone()
        conn.execute("DELETE FROM entries WHERE key = ?", (row[0],))
        conn.execute(f"INSERT INTO entries ({OLD_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", row)
    replay = evaluate(records(), METRICS, judge=options(old), bootstrap=10)
    assert replay.manifest["judge"]["cache"]["hits"] == 10
    with JudgeCache(old) as opened:
        assert opened.stats()["entries"] == 10


def unit_and_schema() -> tuple[Any, ReplySchema]:
    schema = ReplySchema("verdict", {"type": "object",
                                     "properties": {"score": {"type": "integer"}}})
    judge = JudgeOptions(model="judge-model")
    unit = make_unit(judge, schema, 0, None, 0, [{"role": "user", "content": "Grade this."}])
    return unit, schema


def test_a_reply_stored_without_id_keeps_its_place_in_the_ladder(tmp_path: Path) -> None:
    """Where an earlier version stored a reply under a key the ladder prefers to the one a
    reply with an id is under, the earlier reply wins, as it did."""
    unit, _ = unit_and_schema()
    path = tmp_path / "cache.sqlite"
    with JudgeCache(path) as cache:
        cache.put_many([(unit.keys["text"], {"model": "judge-model"}, "later", None,
                         {"format": "text"}, unit.request_id)])
    with sqlite3.connect(path) as conn:
        conn.execute(f"INSERT INTO entries ({OLD_COLUMNS}) VALUES (?,?,?,?,?,?,0,0,0,0)",
                     (unit.keys["json_schema"], "judge-model", "{}", "earlier", "{}", "{}"))
    with JudgeCache(path) as cache:
        [found] = cache.lookup([unit.lookup()], backfill=True)
        assert found is not None and found.reply_text == "earlier"
        assert cache.find([unit.lookup()]) == [unit.keys["json_schema"]]


def test_a_cache_that_cannot_gain_the_column_is_read_by_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unit, _ = unit_and_schema()
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(OLD_SCHEMA)
    monkeypatch.setattr(store, "_ADD_REQUEST_ID", "ALTER TABLE nowhere ADD COLUMN x")
    with JudgeCache(path) as cache:
        assert cache.put(unit.keys["json_object"], {"model": "judge-model", "endpoint": "e"},
                         "reply", {"prompt_tokens": 3}, {"format": "json_object"})
        [found] = cache.lookup([unit.lookup()], backfill=True)
        assert found == store.Stored(unit.keys["json_object"], "reply", {"prompt_tokens": 3},
                                     {"format": "json_object"}, "e")
        assert cache.get(unit.keys["json_object"]).request_id is None  # type: ignore[union-attr]


def test_export_and_import_keep_request_ids(tmp_path: Path) -> None:
    unit, _ = unit_and_schema()
    with JudgeCache(tmp_path / "a.sqlite") as a:
        a.put_many([(unit.keys["json_object"], {"model": "judge-model"}, "reply", None, None,
                     unit.request_id)])
        a.export_jsonl(tmp_path / "dump.jsonl")
    line = json.loads((tmp_path / "dump.jsonl").read_text(encoding="utf-8"))
    assert line["request_id"] == unit.request_id
    with JudgeCache(tmp_path / "b.sqlite") as b:
        assert b.import_jsonl(tmp_path / "dump.jsonl") == {"read": 1, "added": 1}
        assert b.find([unit.lookup()]) == [unit.keys["json_object"]]
    line["request_id"] = "not a key"
    (tmp_path / "bad.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    with JudgeCache(tmp_path / "c.sqlite") as c, pytest.raises(InputError) as caught:
        c.import_jsonl(tmp_path / "bad.jsonl")
    assert "request_id" in str(caught.value) and "line 1" in str(caught.value)


@pytest.mark.parametrize("allow_missing", [False, True])
def test_each_request_is_rendered_once(tmp_path: Path, server: JudgeServer,
                                       monkeypatch: pytest.MonkeyPatch,
                                       allow_missing: bool) -> None:
    """The offline check before scoring renders every request; the scoring takes those
    requests instead of rendering them again (without the check, it renders them itself)."""
    cache, online = fill(tmp_path, server)
    calls: list[str] = []
    real = rubric_metric.render

    def counted(rubric: Any, record: Record, *args: Any) -> Any:
        calls.append(record.id)
        return real(rubric, record, *args)

    monkeypatch.setattr(rubric_metric, "render", counted)
    replay = evaluate(records(), METRICS, bootstrap=10,
                      judge=options(cache, allow_missing=allow_missing))
    assert sorted(calls) == sorted([r.id for r in records()] * 2)
    assert [r.to_json()["scores"] for r in replay.records] == \
        [r.to_json()["scores"] for r in online.records]


_TEXT = st.text()
_MESSAGE = st.one_of(st.fixed_dictionaries({"role": _TEXT, "content": _TEXT}),
                     st.fixed_dictionaries({"content": _TEXT, "role": _TEXT, "name": _TEXT}),
                     st.dictionaries(st.text(max_size=5), _TEXT, max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.lists(_MESSAGE, max_size=4), st.sampled_from([0, 1, 2]))
def test_keys_encode_the_messages_as_canonical_json(messages: list[dict[str, str]],
                                                    sample: int) -> None:
    """The keys are those of the canonical JSON of the request, however its messages are
    encoded on the way."""
    formats = {"json_object": encode_format({"type": "json_object"}), "text": "null"}
    keys, request_id = keys_and_request_id("m", messages, {"temperature": 0.0}, formats, sample)
    assert keys == {name: cache_key("m", messages, {"temperature": 0.0}, fmt, sample)
                    for name, fmt in (("json_object", {"type": "json_object"}),
                                      ("text", None))}
    assert request_id == keys["text"]


def _old_writer(path: str, worker: int, n: int) -> None:
    """A process opening an earlier version's cache (which it gains the column in) and
    writing replies with their ids, while others do the same."""
    with JudgeCache(path) as cache:
        for i in range(n):
            keys, request_id = keys_and_request_id(
                "m", [{"role": "user", "content": f"{worker}/{i}"}], {}, {"text": "null"})
            cache.put_many([(keys["text"], {"model": "m"}, f"reply {worker}/{i}",
                             {"total_tokens": 1}, None, request_id)])


def test_processes_opening_an_old_cache_together_all_write(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(OLD_SCHEMA)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_old_writer, args=(str(path), w, 40)) for w in (1, 2)]
    for p in procs:
        p.start()
    _old_writer(str(path), 3, 40)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*), COUNT(request_id) FROM entries").fetchone() \
            == (120, 120)


def test_a_lookup_binds_no_more_values_than_the_sqlite_takes(tmp_path: Path) -> None:
    """SQLite before 3.32 binds at most 999 values a statement: a lookup of more stays in
    that limit (a cache connection made to refuse more, as such a SQLite does)."""
    from rageval.judge.llm.cache.store import JudgeCache

    keys = [f"{i:064x}" for i in range(1500)]
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        cache.put(keys[0], {"model": "m"}, "reply")
        cache._writer().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        found = cache.lookup([(None, (key,)) for key in keys])
    assert found[0] is not None and found[0].reply_text == "reply"
    assert all(hit is None for hit in found[1:])


def test_ids_are_not_backfilled_into_a_file_that_cannot_be_written(tmp_path: Path) -> None:
    """The ids only spare a later replay its lookups by key: a cache opened read-only keeps
    its replies as they are, and nothing is raised."""
    from rageval.judge.llm.cache.store import JudgeCache, _backfill

    key = "a" * 64
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        cache.put(key, {"model": "m"}, "reply")  # stored without a request id
    readonly = sqlite3.connect(f"file:{tmp_path / 'c.sqlite'}?mode=ro", uri=True,
                               isolation_level=None)
    try:
        _backfill(readonly, [("b" * 64, key)])
        assert readonly.execute("SELECT request_id FROM entries").fetchall() == [(None,)]
    finally:
        readonly.close()
