"""The judge as a metric, end to end against the loopback judge server (real HTTP)."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import JudgeServer, judge_score

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import RagevalError, UsageError
from rageval.core.metric import ScoreOptions
from rageval.core.records import Record, load_records
from rageval.core.registry import create
from rageval.judge.llm.cache.store import JudgeCache
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.rubric.metric import JudgeMetric
from rageval.judge.rubric.render import render

KEY = "sk-test-DO-NOT-LEAK-0123456789abcdef"
ENV = "RAGEVAL_TEST_JUDGE_KEY"
METRICS = ["judge:faithfulness", "judge:correctness"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(ENV, KEY)
    with JudgeServer(expected_key=KEY) as s:
        yield s


def write_records(path: Path, n: int = 4) -> Path:
    lines = []
    for i in range(n):
        lines.append(json.dumps({
            "id": f"q{i}",
            "query": f"What is fact number {i}?",
            "contexts": [f"Fact {i} is that the sky is blue.", f"Unrelated text {i}."],
            "answer": f"Fact {i}: the sky is blue.",
            "reference": f"The sky is blue ({i}).",
        }))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def options(server: JudgeServer | None, cache: Path, **kw: object) -> JudgeOptions:
    base = {"model": "judge-model", "cache": str(cache), "api_key_env": ENV,
            "timeout": 5.0, "max_retries": 1,
            "base_url": server.base_url if server is not None else "http://127.0.0.1:9/v1"}
    base.update(kw)
    return JudgeOptions(**base)  # type: ignore[arg-type]


def expected(record: Record, rubric_name: str) -> int:
    metric = create(rubric_name, ScoreOptions(judge=JudgeOptions(model="judge-model")))
    assert isinstance(metric, JudgeMetric)
    return judge_score(render(metric.rubric, record)[-1]["content"])


def test_scored_run_then_offline_replay(tmp_path: Path, server: JudgeServer) -> None:
    records = load_records(write_records(tmp_path / "r.jsonl"))
    cache = tmp_path / "cache.sqlite"
    first = evaluate(records, METRICS, judge=options(server, cache), bootstrap=50)
    assert server.requests == 8
    for row, record in zip(first.records, records, strict=True):
        for name in METRICS:
            assert row.scores[name] == expected(record, name)
            assert row.details[name]["cached"] is False
            assert row.details[name]["reasoning"].startswith("Scripted")
            assert "raw" not in row.details[name]
    for name in METRICS:
        assert 1 <= first.summary[name].value <= 5
        sig = first.summary[name].signature
        assert "judge:judge-model" in sig and f"endpoint:{server.base_url}|" in sig
        assert "|response_format:json_schema|" in sig
        assert sig.endswith("|rageval:0.1.0") and KEY not in sig
    manifest = first.manifest["judge"]
    assert manifest["model"] == "judge-model"
    assert manifest["cache"]["misses"] == 8 and manifest["cache"]["hits"] == 0
    assert manifest["cache"]["stored"] == 8 and manifest["requests"] == 8
    assert manifest["usage"]["total_tokens"] > 0
    assert set(manifest["prompts"]) == {"faithfulness", "correctness"}

    out = tmp_path / "out"
    first.write(out)
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["q0", "q1", "q2", "q3"]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["metrics"]) == set(METRICS)
    assert summary["manifest"]["judge"]["endpoint"] == server.base_url

    replay = evaluate(records, METRICS, judge=options(None, cache, offline=True), bootstrap=50)
    assert server.requests == 8  # no request at all
    assert [r.scores for r in replay.records] == [r.scores for r in first.records]
    assert all(r.details[n]["cached"] for r in replay.records for n in METRICS)
    assert replay.manifest["judge"]["cache"]["hits"] == 8


def test_offline_empty_cache_fails_before_output(tmp_path: Path, capsys) -> None:
    records = write_records(tmp_path / "r.jsonl", n=7)
    out = tmp_path / "out"
    code = main(["score", str(records), "-m", "judge:faithfulness", "-m", "judge:correctness",
                 "--judge-model", "judge-model", "--offline",
                 "--cache", str(tmp_path / "none.sqlite"), "--out", str(out),
                 "--no-progress"], stdout=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2
    assert "14 of 14 judge replies are not in the cache" in err
    assert "q0 (faithfulness)" in err and "and 9 more" in err
    assert not (out / "records.jsonl").exists() and not (out / "summary.json").exists()
    assert not (tmp_path / "none.sqlite").exists()


def test_allow_missing_leaves_unscored(tmp_path: Path, server: JudgeServer) -> None:
    records = load_records(write_records(tmp_path / "r.jsonl", n=4))
    cache = tmp_path / "cache.sqlite"
    evaluate(records[:2], ["judge:faithfulness"], judge=options(server, cache), bootstrap=10)
    with pytest.raises(RagevalError, match="2 of 4 judge replies"):
        evaluate(records, ["judge:faithfulness"], judge=options(None, cache, offline=True))
    res = evaluate(records, ["judge:faithfulness"],
                   judge=options(None, cache, offline=True, allow_missing=True), bootstrap=10)
    scores = [r.scores["judge:faithfulness"] for r in res.records]
    assert scores[:2] == [expected(r, "judge:faithfulness") for r in records[:2]]
    assert scores[2:] == [None, None]
    assert res.records[3].errors["judge:faithfulness"] == "not in the judge cache (offline)"
    summary = res.summary["judge:faithfulness"]
    assert summary.n == 2 and summary.unscored == 2
    assert server.requests == 2


def test_restart_asks_only_for_missing(tmp_path: Path, server: JudgeServer) -> None:
    records = load_records(write_records(tmp_path / "r.jsonl", n=6))
    cache = tmp_path / "cache.sqlite"
    # A permanent failure stops the first run part-way; what arrived is kept in the cache.
    server.fail_next(None, None, "401")
    with pytest.raises(RagevalError) as info:
        evaluate(records, ["judge:faithfulness"], judge=options(server, cache, concurrency=1))
    assert KEY not in str(info.value)
    with JudgeCache(cache) as c:
        kept = len(c)
    assert kept == 2
    before = server.requests
    res = evaluate(records, ["judge:faithfulness"], judge=options(server, cache))
    assert server.requests - before == 6 - kept
    assert all(r.scores["judge:faithfulness"] is not None for r in res.records)
    assert res.manifest["judge"]["cache"]["hits"] == kept


def test_replies_are_committed_in_lots_and_none_is_lost(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """At high concurrency the replies that arrive together are committed together; every
    reply is in the cache when the run ends, and when it stops on a permanent failure."""
    monkeypatch.setenv(ENV, KEY)
    lots: list[int] = []
    put_many = JudgeCache.put_many

    def counted(self: JudgeCache, replies: list, **kw: object) -> int:
        lots.append(len(replies))
        return put_many(self, replies, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(JudgeCache, "put_many", counted)
    records = load_records(write_records(tmp_path / "r.jsonl", n=32))
    with JudgeServer(expected_key=KEY, latency_s=0.05) as server:
        res = evaluate(records, ["judge:fluency"], bootstrap=10,
                       judge=options(server, tmp_path / "c.sqlite", concurrency=8))
        assert res.manifest["judge"]["cache"]["stored"] == sum(lots) == 32
        assert len(lots) < 32
        with JudgeCache(tmp_path / "c.sqlite") as c:
            assert len(c) == 32
        # A permanent failure mid-run: what arrived, the replies in flight included, is kept.
        metric = create("judge:coherence", ScoreOptions(judge=JudgeOptions(model="judge-model")))
        assert isinstance(metric, JudgeMetric)
        server.fail_for(render(metric.rubric, records[12])[-1]["content"], "401")
        before = server.requests
        with pytest.raises(RagevalError, match="HTTP 401"):
            evaluate(records, ["judge:coherence"],
                     judge=options(server, tmp_path / "d.sqlite", concurrency=8))
        answered = server.requests - before - 1
        assert 12 <= answered < 31
        with JudgeCache(tmp_path / "d.sqlite") as c:
            assert len(c) == answered


def test_unusable_replies_are_unscored_with_raw(tmp_path: Path, server: JudgeServer) -> None:
    records = load_records(write_records(tmp_path / "r.jsonl", n=3))
    metric = create("judge:fluency", ScoreOptions(judge=JudgeOptions(model="judge-model")))
    assert isinstance(metric, JudgeMetric)
    server.fail_for(render(metric.rubric, records[0])[-1]["content"], "out_of_range")
    server.fail_for(render(metric.rubric, records[1])[-1]["content"], "prose")
    cache = tmp_path / "cache.sqlite"
    res = evaluate(records, ["judge:fluency"], judge=options(server, cache), bootstrap=10)
    first, second, third = res.records
    assert first.scores["judge:fluency"] is None
    assert "outside the rubric's scale 1-5" in first.errors["judge:fluency"]
    assert json.loads(first.details["judge:fluency"]["raw"])["score"] == 9
    assert second.scores["judge:fluency"] is None
    assert second.details["judge:fluency"]["raw"].startswith("The answer seems")
    assert third.scores["judge:fluency"] == expected(records[2], "judge:fluency")
    assert res.summary["judge:fluency"].unscored == 2
    # The replies are kept; a replay gives the same unscored values with the same reasons.
    replay = evaluate(records, ["judge:fluency"], judge=options(None, cache, offline=True),
                      bootstrap=10)
    assert [r.errors for r in replay.records] == [r.errors for r in res.records]


def test_failed_request_is_unscored(tmp_path: Path, server: JudgeServer) -> None:
    records = load_records(write_records(tmp_path / "r.jsonl", n=2))
    server.fail_next("500", "500")
    res = evaluate(records, ["judge:fluency"],
                   judge=options(server, tmp_path / "c.sqlite", concurrency=1, max_retries=1),
                   bootstrap=10)
    row = res.records[0]
    assert row.scores["judge:fluency"] is None
    assert row.errors["judge:fluency"].startswith("judge request failed: HTTP 500")
    assert res.records[1].scores["judge:fluency"] is not None
    with JudgeCache(tmp_path / "c.sqlite") as c:
        assert len(c) == 1  # errors are never cached


def test_refresh_asks_again_and_replaces(tmp_path: Path, server: JudgeServer) -> None:
    records = load_records(write_records(tmp_path / "r.jsonl", n=2))
    cache = tmp_path / "cache.sqlite"
    server.always = "prose"
    evaluate(records, ["judge:fluency"], judge=options(server, cache), bootstrap=10)
    server.always = None
    again = evaluate(records, ["judge:fluency"], judge=options(server, cache), bootstrap=10)
    assert server.requests == 2
    assert all(r.scores["judge:fluency"] is None for r in again.records)
    fresh = evaluate(records, ["judge:fluency"], judge=options(server, cache, refresh=True),
                     bootstrap=10)
    assert server.requests == 4
    assert all(r.scores["judge:fluency"] is not None for r in fresh.records)
    replay = evaluate(records, ["judge:fluency"], judge=options(None, cache, offline=True),
                      bootstrap=10)
    assert [r.scores for r in replay.records] == [r.scores for r in fresh.records]


def test_needs_a_model_and_checks_fields(tmp_path: Path) -> None:
    records = [Record(id="a", query="q", answer="x"), Record(id="b", query="q")]
    with pytest.raises(UsageError, match="judge model"):
        evaluate(records, ["judge:fluency"])
    with pytest.raises(UsageError, match="needs 'contexts'"):
        evaluate(records, ["judge:faithfulness"], judge=JudgeOptions(model="m"))
    with pytest.raises(UsageError, match="unknown rubric"):
        evaluate(records, ["judge:nonsense"], judge=JudgeOptions(model="m"))
    res = evaluate(records, ["judge:fluency"],
                   judge=JudgeOptions(model="m", cache=str(tmp_path / "c.sqlite"), offline=True,
                                      allow_missing=True), bootstrap=10)
    assert res.records[1].errors["judge:fluency"] == "no answer (the record has no 'answer')"


def test_cli_scores_with_key_from_env(tmp_path: Path, server: JudgeServer, capsys) -> None:
    records = write_records(tmp_path / "r.jsonl", n=3)
    cache = tmp_path / "c.sqlite"
    out = tmp_path / "out"
    stdout = io.StringIO()
    args = ["score", str(records), "-m", "judge:faithfulness", "-m", "judge:correctness",
            "--judge-model", "judge-model", "--judge-base-url", server.base_url,
            "--judge-api-key-env", ENV, "--cache", str(cache), "--judge-concurrency", "4",
            "--out", str(out), "--no-progress", "--bootstrap", "20"]
    assert main(args, stdout=stdout) == 0
    err = capsys.readouterr().err
    text = stdout.getvalue() + err
    written = (out / "records.jsonl").read_text() + (out / "summary.json").read_text()
    assert KEY not in text and KEY not in written
    assert server.requests == 6
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert all(1 <= r["scores"]["judge:faithfulness"] <= 5 for r in rows)

    # Offline replay from the CLI: no request, identical numbers.
    out2 = tmp_path / "out2"
    args2 = ["score", str(records), "-m", "judge:faithfulness", "-m", "judge:correctness",
             "--judge-model", "judge-model", "--offline", "--cache", str(cache),
             "--out", str(out2), "--no-progress", "--bootstrap", "20"]
    assert main(args2, stdout=io.StringIO()) == 0
    assert server.requests == 6
    rows2 = [json.loads(line) for line in (out2 / "records.jsonl").read_text().splitlines()]
    assert [r["scores"] for r in rows2] == [r["scores"] for r in rows]

    # The cache subcommands.
    stdout = io.StringIO()
    assert main(["cache", "stats", "--cache", str(cache)], stdout=stdout) == 0
    assert json.loads(stdout.getvalue())["entries"] == 6
    export = tmp_path / "export.jsonl"
    assert main(["cache", "export", str(export), "--cache", str(cache)], stdout=io.StringIO()) == 0
    assert len(export.read_text().splitlines()) == 6 and KEY not in export.read_text()
    other = tmp_path / "other.sqlite"
    stdout = io.StringIO()
    assert main(["cache", "import", str(export), "--cache", str(other)], stdout=stdout) == 0
    assert "added 6" in stdout.getvalue()


def test_cli_requires_judge_model(tmp_path: Path, capsys) -> None:
    records = write_records(tmp_path / "r.jsonl", n=1)
    code = main(["score", str(records), "-m", "judge:fluency", "--offline",
                 "--cache", str(tmp_path / "c.sqlite")], stdout=io.StringIO())
    assert code == 2
    assert "--judge-model" in capsys.readouterr().err


def test_the_rubrics_of_a_run_ask_in_one_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 ) -> None:
    """Two rubrics over several batches: one stream of requests, not a round per rubric (or
    per batch) whose requests in flight drain to zero before the next starts. Each rubric has
    4 requests here, so more than 4 in flight at once means both were asked together; each
    reply is stored with its own rubric, and the prompts of both are in the manifest."""
    monkeypatch.setenv(ENV, KEY)
    records = load_records(write_records(tmp_path / "r.jsonl", n=4))
    with JudgeServer(expected_key=KEY, latency_s=0.3) as server:
        res = evaluate(records, ["judge:fluency", "judge:coherence"], bootstrap=10,
                       batch_size=2, judge=options(server, tmp_path / "c.sqlite",
                                                   concurrency=16))
        assert server.requests == 8 and server.max_in_flight > 4
    assert res.summary["judge:fluency"].n == res.summary["judge:coherence"].n == 4
    assert set(res.manifest["judge"]["prompts"]) == {"fluency", "coherence"}
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        rubrics = sorted(entry.meta["rubric"] for entry in cache.entries())
    assert rubrics == ["coherence"] * 4 + ["fluency"] * 4
