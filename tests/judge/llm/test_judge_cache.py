"""Tests of the judge reply cache (rageval.judge.llm.cache.store)."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rageval.core.errors import InputError, UsageError
from rageval.judge.llm.cache.store import JudgeCache, cache_key

MESSAGES = [
    {"role": "system", "content": "You are a strict grader."},
    {"role": "user", "content": "Question: q1\nAnswer: a1"},
]
PARAMS = {"temperature": 0.0, "seed": 7, "max_tokens": 256}
SCHEMA = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": {"type": "object"}}}
ROOT = Path(__file__).resolve().parents[3]


def _key(i: int, model: str = "judge-model") -> str:
    return cache_key(model, [{"role": "user", "content": f"item {i}"}], PARAMS, None, 0)


def _summary(i: int, model: str = "judge-model") -> dict:
    return {"model": model, "messages": [{"role": "user", "content": f"item {i}"}],
            "params": PARAMS}


def test_round_trip(tmp_path: Path) -> None:
    key = cache_key("judge-model", MESSAGES, PARAMS, SCHEMA, 0)
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        assert cache.get(key) is None
        assert cache.put(key, {"model": "judge-model", "messages": MESSAGES},
                         '{"score": 4}', {"prompt_tokens": 10, "completion_tokens": 3,
                                          "total_tokens": 13}, {"prompt_hash": "abc"})
        assert not cache.put(key, {"model": "judge-model"}, "other", {})  # first reply wins
    with JudgeCache(tmp_path / "c.sqlite") as cache:  # reopened: it was on disk
        e = cache.get(key)
        assert e is not None
        assert e.reply_text == '{"score": 4}'
        assert e.model == "judge-model"
        assert e.usage == {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        assert e.meta == {"prompt_hash": "abc"}
        assert e.request["messages"] == MESSAGES
        assert key in cache and len(cache) == 1
        stats = cache.stats()
        assert stats["entries"] == 1 and stats["by_model"] == {"judge-model": 1}
        assert stats["total_tokens"] == 13 and stats["size_bytes"] > 0
        other = _key(1)
        assert cache.missing([other, key, other]) == [other]
        mode = cache._conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_key_sensitivity() -> None:
    base = cache_key("judge-model", MESSAGES, PARAMS, SCHEMA, 0)
    variants = [
        cache_key("judge-model-2", MESSAGES, PARAMS, SCHEMA, 0),
        cache_key("judge-model", [{**MESSAGES[0], "content": "You are lenient."}, MESSAGES[1]],
                  PARAMS, SCHEMA, 0),
        cache_key("judge-model", [MESSAGES[0], {**MESSAGES[1], "content": "Q: q2"}],
                  PARAMS, SCHEMA, 0),
        cache_key("judge-model", [MESSAGES[0], {**MESSAGES[1], "role": "assistant"}],
                  PARAMS, SCHEMA, 0),
        cache_key("judge-model", MESSAGES[1:], PARAMS, SCHEMA, 0),
        cache_key("judge-model", MESSAGES, {**PARAMS, "temperature": 0.7}, SCHEMA, 0),
        cache_key("judge-model", MESSAGES, {**PARAMS, "seed": 8}, SCHEMA, 0),
        cache_key("judge-model", MESSAGES, {**PARAMS, "max_tokens": 512}, SCHEMA, 0),
        cache_key("judge-model", MESSAGES, {**PARAMS, "top_p": 0.9}, SCHEMA, 0),
        cache_key("judge-model", MESSAGES, PARAMS, None, 0),
        cache_key("judge-model", MESSAGES, PARAMS, {"type": "json_object"}, 0),
        cache_key("judge-model", MESSAGES, PARAMS, SCHEMA, 1),
    ]
    assert base not in variants
    assert len(set(variants)) == len(variants)
    # Canonical: dict order and unset (None) parameters do not matter.
    reordered = [{"content": m["content"], "role": m["role"]} for m in MESSAGES]
    same = cache_key("judge-model", reordered, {**dict(reversed(PARAMS.items())), "top_p": None},
                     SCHEMA, 0)
    assert same == base
    assert len(base) == 64 and int(base, 16) >= 0


def test_credentials_are_never_stored(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="credentials"):
        cache_key("m", MESSAGES, {"api_key": "sk-x"})
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        cache.put(_key(0), {**_summary(0), "api_key": "sk-supersecret",
                            "headers": {"Authorization": "Bearer sk-supersecret"}}, "r", {})
        cache.export_jsonl(tmp_path / "out.jsonl")
    assert "sk-supersecret" not in (tmp_path / "out.jsonl").read_text()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("c.sqlite"))
    assert b"sk-supersecret" not in raw


def test_put_rejects_bad_arguments(tmp_path: Path) -> None:
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        with pytest.raises(UsageError):
            cache.put("not-a-key", {}, "r", {})
        with pytest.raises(UsageError):
            cache.put(_key(0), {}, None, {})  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            cache.put(_key(0), {}, "r", {"total_tokens": -1})


def _writer(path: str, worker: int, n: int) -> None:
    with JudgeCache(path) as cache:
        for i in range(n):
            cache.put(_key(worker * 100_000 + i), _summary(worker * 100_000 + i),
                      f"reply {worker}/{i}", {"total_tokens": 1})


def test_put_many_stores_a_lot_in_one_transaction(tmp_path: Path) -> None:
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        assert cache.put(_key(0), _summary(0), "first", {"total_tokens": 1})
        lot = [(_key(i), _summary(i), f"reply {i}", {"total_tokens": 2}, {"record": f"r{i}"})
               for i in range(3)]
        assert cache.put_many(lot) == 2  # the stored reply of key 0 is kept
        assert cache.get(_key(0)).reply_text == "first"  # type: ignore[union-attr]
        assert cache.get(_key(2)).meta == {"record": "r2"}  # type: ignore[union-attr]
        again = [(_key(1), _summary(1), "one", None, None), (_key(1), _summary(1), "two", None,
                                                              None)]
        assert cache.put_many(again, replace=True) == 2
        assert cache.get(_key(1)).reply_text == "two"  # type: ignore[union-attr]
        assert cache.put_many([]) == 0
        # Validated before anything is written: a bad reply stores none of its lot.
        bad = [(_key(5), _summary(5), "fine", None, None), ("not-a-key", {}, "x", None, None)]
        with pytest.raises(UsageError):
            cache.put_many(bad)
        assert _key(5) not in cache
        with pytest.raises(UsageError, match="usage"):
            cache.put_many([(_key(6), _summary(6), "x", {"total_tokens": -1}, None)])
        assert len(cache) == 3


def test_two_processes_write_concurrently(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    JudgeCache(path).close()
    ctx = multiprocessing.get_context("spawn")
    n = 150
    procs = [ctx.Process(target=_writer, args=(path, w, n)) for w in (1, 2)]
    for p in procs:
        p.start()
    _writer(path, 3, n)  # and this process as a third writer
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with JudgeCache(path) as cache:
        assert len(cache) == 3 * n
        assert cache.stats()["total_tokens"] == 3 * n
        keys = [_key(w * 100_000 + i) for w in (1, 2, 3) for i in range(n)]
        assert cache.missing(keys) == []
        e = cache.get(_key(200_000 + 17))
        assert e is not None and e.reply_text == "reply 2/17"


_KILL_CHILD = """
import sys
from rageval.judge.llm.cache.store import JudgeCache, cache_key
cache = JudgeCache(sys.argv[1])
i = 0
while True:
    key = cache_key("m", [{"role": "user", "content": f"item {i}"}], {}, None, 0)
    cache.put(key, {"model": "m"}, f"reply {i}", {"total_tokens": 2})
    print(i, key, flush=True)
    i += 1
"""


def test_sigkill_keeps_every_committed_reply(tmp_path: Path) -> None:
    path = tmp_path / "killed.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-c", _KILL_CHILD, str(path)],
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    seen: list[tuple[int, str]] = []
    deadline = time.monotonic() + 20
    while len(seen) < 200 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        i, key = line.split()
        seen.append((int(i), key))
    child.send_signal(signal.SIGKILL)  # mid-run: it is still writing
    rest, _ = child.communicate(timeout=10)
    # Only whole lines: the kill can cut the last print short (each line is printed after its
    # reply was committed, so a whole line is a stored reply).
    # A line the kill cut short lacks its key: a stored reply is a line of exactly its index
    # and its key.
    whole = [ln.split() for ln in rest.split("\n")[:-1]]
    seen += [(int(parts[0]), parts[1]) for parts in whole if len(parts) == 2]
    assert child.returncode == -signal.SIGKILL
    assert len(seen) >= 200
    with JudgeCache(path) as cache:
        assert cache.missing([k for _, k in seen]) == []
        for i, k in seen[::37]:
            e = cache.get(k)
            assert e is not None and e.reply_text == f"reply {i}"


def test_export_import_round_trip(tmp_path: Path) -> None:
    with JudgeCache(tmp_path / "a.sqlite") as a:
        for i in range(20):
            a.put(_key(i, "m1" if i % 3 else "m2"), _summary(i, "m1" if i % 3 else "m2"),
                  f"reply \u2028 {i} ✓", {"prompt_tokens": i, "completion_tokens": 1,
                                          "total_tokens": i + 1}, {"i": i})
        assert a.export_jsonl(tmp_path / "dump.jsonl") == 20
        buf = io.StringIO()
        a.export_jsonl(buf)
        assert buf.getvalue() == (tmp_path / "dump.jsonl").read_text(encoding="utf-8")
        stats_a = a.stats()
        entries_a = a.entries()
    with JudgeCache(tmp_path / "b.sqlite") as b:
        assert b.import_jsonl(tmp_path / "dump.jsonl") == {"read": 20, "added": 20}
        assert b.import_jsonl(tmp_path / "dump.jsonl") == {"read": 20, "added": 0}  # idempotent
        assert b.entries() == entries_a
        sb = b.stats()
        for k in ("entries", "by_model", "prompt_tokens", "completion_tokens", "total_tokens"):
            assert sb[k] == stats_a[k]
        b.export_jsonl(tmp_path / "dump2.jsonl")
    assert (tmp_path / "dump2.jsonl").read_bytes() == (tmp_path / "dump.jsonl").read_bytes()


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ("{not json", None),
        ("[1, 2]", None),
        ('{"key": "abc", "reply": "r"}', "key"),
        ('{"key": "' + "a" * 64 + '", "reply": 3}', "reply"),
        ('{"key": "' + "a" * 64 + '", "reply": "r", "usage": {"total_tokens": -2}}', "usage"),
    ],
)
def test_import_malformed_line_names_the_line(tmp_path: Path, bad: str, field: str | None) -> None:
    with JudgeCache(tmp_path / "a.sqlite") as a:
        a.put(_key(1), _summary(1), "one", {})
        a.put(_key(2), _summary(2), "two", {})
        a.export_jsonl(tmp_path / "dump.jsonl")
    lines = (tmp_path / "dump.jsonl").read_text().splitlines()
    (tmp_path / "bad.jsonl").write_text("\n".join([lines[0], "", bad, lines[1]]) + "\n")
    with JudgeCache(tmp_path / "b.sqlite") as b:
        with pytest.raises(InputError) as info:
            b.import_jsonl(tmp_path / "bad.jsonl")
        assert info.value.line == 3
        assert info.value.field == field
        assert "bad.jsonl" in str(info.value) and "line 3" in str(info.value)
        assert len(b) == 0  # all or nothing


def test_import_missing_file(tmp_path: Path) -> None:
    with JudgeCache(tmp_path / "a.sqlite") as a, pytest.raises(InputError, match="cannot read"):
        a.import_jsonl(tmp_path / "nope.jsonl")


def test_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "junk.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(InputError, match=r"junk\.sqlite"):
        JudgeCache(tmp_path / "junk.sqlite")


def test_export_is_json_lines(tmp_path: Path) -> None:
    with JudgeCache(tmp_path / "a.sqlite") as a:
        a.put(_key(1), _summary(1), "one", {"total_tokens": 5})
        buf = io.StringIO()
        a.export_jsonl(buf)
    (obj,) = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert obj["key"] == _key(1) and obj["reply"] == "one" and obj["usage"] == {"total_tokens": 5}


def test_a_lone_surrogate_in_a_request_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not JSON-serialisable"):
        cache_key("judge-model", [{"role": "user", "content": "a\ud800b"}])


def test_a_lot_that_cannot_be_stored_keeps_its_good_replies(tmp_path: Path) -> None:
    from rageval.judge.llm.replies import RunStats, _Arrived

    with JudgeCache(tmp_path / "c.sqlite") as cache:
        arrived = _Arrived(cache, RunStats(), replace=False)
        arrived.add((_key(1), _summary(1), "good", None, None))
        arrived.add(("not-a-key", {}, "bad", None, None))
        arrived.add((_key(2), _summary(2), "also good", None, None))
        with pytest.raises(UsageError):
            arrived.commit()
        assert _key(1) in cache and _key(2) in cache
        assert arrived.stats.stored == 2
