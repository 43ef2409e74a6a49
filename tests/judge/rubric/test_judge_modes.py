"""Judge modes beyond one reply per record: per-context grading, judgments from the judge,
several samples, log-probability scoring, cost, JSONL replay, and request counts after a kill."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import JudgeServer, judge_score, score_distribution

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import RagevalError, UsageError
from rageval.core.records import Record, records_from_dicts
from rageval.judge.llm.cache.store import JudgeCache, cache_key
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.rubric.render import render, response_format
from rageval.judge.rubric.rubrics import load_rubric
from rageval.retrieval.measures import NOT_JUDGED

ROOT = Path(__file__).resolve().parents[3]
RELEVANCE = "judge:context_relevance"


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


def records(n: int = 3) -> list[Record]:
    out = []
    for i in range(n):
        item = {"id": f"q{i}", "query": f"Who wrote book {i}?",
                "contexts": [{"id": f"d{i}a", "text": f"Book {i} was written by author {i}."},
                             {"id": f"d{i}b", "text": f"A review of book {i}."},
                             {"id": f"d{i}c", "text": "The weather is mild."}],
                "answer": f"Author {i} wrote it.", "reference": f"Author {i}."}
        out.append(item)
    return records_from_dicts(out)


def _record(item: dict) -> Record:
    return records_from_dicts([item])[0]


def opts(server: JudgeServer | None, tmp_path: Path, **kw: object) -> JudgeOptions:
    base: dict[str, object] = {
        "model": "judge-model", "cache": str(tmp_path / "cache.sqlite"), "timeout": 5.0,
        "max_retries": 1,
        "base_url": server.base_url if server is not None else "http://127.0.0.1:9/v1"}
    base.update(kw)
    return JudgeOptions(**base)  # type: ignore[arg-type]


def grades(record: Record, seed: int | None = None) -> list[int]:
    rubric = load_rubric("context_relevance")
    return [judge_score(render(rubric, record, i)[-1]["content"], seed)
            for i in range(len(record.contexts))]


# -- per-context grading ---------------------------------------------------------------------


def test_context_relevance_grades_each_context(tmp_path: Path, server: JudgeServer) -> None:
    recs = records(3)
    res = evaluate(recs, [RELEVANCE], judge=opts(server, tmp_path), bootstrap=10)
    assert server.requests == 9  # one request per context
    for row, record in zip(res.records, recs, strict=True):
        want = grades(record)
        assert all(0 <= g <= 3 for g in want)
        assert row.scores[RELEVANCE] == pytest.approx(sum(want) / 3)
        listed = row.details[RELEVANCE]["contexts"]
        assert [c["id"] for c in listed] == [c.id for c in record.contexts]
        assert [c["grade"] for c in listed] == want
    assert "r:context_relevance" in res.summary[RELEVANCE].short_signature


def test_a_context_not_graded_leaves_the_record_unscored(tmp_path: Path,
                                                         server: JudgeServer) -> None:
    recs = records(2)
    rubric = load_rubric("context_relevance")
    server.fail_for(render(rubric, recs[0], 1)[-1]["content"], "prose")
    res = evaluate(recs, [RELEVANCE], judge=opts(server, tmp_path), bootstrap=10)
    first = res.records[0]
    assert first.scores[RELEVANCE] is None
    assert first.errors[RELEVANCE].startswith("1 of 3 contexts not graded")
    assert first.details[RELEVANCE]["contexts"][1]["grade"] is None
    assert first.details[RELEVANCE]["contexts"][0]["grade"] is not None
    assert res.records[1].scores[RELEVANCE] is not None


# -- judgments from the judge ----------------------------------------------------------------


def test_judgments_from_judge_feed_retrieval_metrics(tmp_path: Path,
                                                     server: JudgeServer) -> None:
    recs = records(3)
    res = evaluate(recs, ["ndcg@3", "p@3"], judge=opts(server, tmp_path),
                   judgments_from="judge", bootstrap=10)
    assert server.requests == 9
    # The same numbers as scoring with those grades given inline.
    inline = [_record({**_as_json(r), "judgments": dict(zip([c.id for c in r.contexts],
                                                            grades(r), strict=True))})
              for r in recs]
    direct = evaluate(inline, ["ndcg@3", "p@3"], bootstrap=10)
    for a, b in zip(res.records, direct.records, strict=True):
        assert a.scores == b.scores
    signature = res.summary["ndcg@3"].signature
    rubric = load_rubric("context_relevance")
    assert f"judgments:judge/context_relevance@{rubric.short_hash}/judge-model" in signature
    assert res.manifest["judged_judgments"]["records_graded"] == 3
    assert res.manifest["judge"]["prompts"]["context_relevance"]["hash"] == rubric.hash

    # Offline replay: no request, the same numbers.
    before = server.requests
    replay = evaluate(recs, ["ndcg@3", "p@3"], judge=opts(None, tmp_path, offline=True),
                      judgments_from="judge", bootstrap=10)
    assert server.requests == before
    assert [r.scores for r in replay.records] == [r.scores for r in res.records]


def _as_json(record: Record) -> dict:
    return {"id": record.id, "query": record.query, "answer": record.answer,
            "contexts": [{"id": c.id, "text": c.text} for c in record.contexts]}


def test_judgments_from_judge_keeps_given_judgments(tmp_path: Path,
                                                    server: JudgeServer) -> None:
    recs = [*records(2), _record({**_as_json(records(1)[0]), "id": "given",
                                  "judgments": {"d0a": 2}})]
    res = evaluate(recs, ["p@3"], judge=opts(server, tmp_path), judgments_from="judge",
                   bootstrap=10)
    assert server.requests == 6  # the record with judgments is not graded
    assert res.records[2].scores["p@3"] == pytest.approx(1 / 3)
    assert "judgments:inline+judge/context_relevance@" in res.summary["p@3"].signature


def test_incomplete_grading_gives_no_judgments(tmp_path: Path, server: JudgeServer) -> None:
    recs = records(2)
    rubric = load_rubric("context_relevance")
    server.fail_for(render(rubric, recs[1], 2)[-1]["content"], "out_of_range")
    res = evaluate(recs, ["p@3"], judge=opts(server, tmp_path), judgments_from="judge",
                   bootstrap=10)
    assert res.records[1].scores["p@3"] is None
    assert res.records[1].errors["p@3"] == NOT_JUDGED
    info = res.manifest["judged_judgments"]
    assert info["records_graded"] == 1 and info["records_incomplete"] == 1
    assert "q1" in info["incomplete"]


def test_judgments_from_judge_offline_miss_fails_first(tmp_path: Path, capsys) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(_as_json(r)) + "\n" for r in records(2)))
    out = tmp_path / "out"
    code = main(["score", str(path), "-m", "ndcg@3", "--judgments-from", "judge",
                 "--judge-model", "m", "--offline", "--cache", str(tmp_path / "c.sqlite"),
                 "--out", str(out), "--no-progress"], stdout=io.StringIO())
    assert code == 2
    assert "6 of 6 judge replies are not in the cache" in capsys.readouterr().err
    assert not (out / "summary.json").exists()


def test_judgments_from_judge_needs_a_model() -> None:
    with pytest.raises(UsageError, match="needs a judge"):
        evaluate(records(1), ["p@3"], judgments_from="judge")


# -- samples, seeds, logprobs ----------------------------------------------------------------


def test_samples_send_seeds_and_report_the_spread(tmp_path: Path, server: JudgeServer) -> None:
    recs = records(2)
    res = evaluate(recs, ["judge:fluency"],
                   judge=opts(server, tmp_path, samples=3, seed=10, temperature=0.7),
                   bootstrap=10)
    assert server.requests == 6
    assert sorted(b["seed"] for b in server.bodies) == [10, 10, 11, 11, 12, 12]
    assert all(b["temperature"] == 0.7 for b in server.bodies)
    rubric = load_rubric("fluency")
    for row, record in zip(res.records, recs, strict=True):
        message = render(rubric, record)[-1]["content"]
        want = [judge_score(message, 10 + i) for i in range(3)]
        detail = row.details["judge:fluency"]
        assert detail["samples"] == want
        assert row.scores["judge:fluency"] == pytest.approx(sum(want) / 3)
        assert detail["range"] == [min(want), max(want)]
        assert detail["sd"] == pytest.approx(_sd(want))
    signature = res.summary["judge:fluency"].signature
    assert "samples:3" in signature and "seed:10" in signature and "temperature:0.7" in signature
    # Each sample is its own cache entry: a replay needs no request.
    replay = evaluate(recs, ["judge:fluency"],
                      judge=opts(None, tmp_path, offline=True, samples=3, seed=10,
                                 temperature=0.7), bootstrap=10)
    assert [r.scores for r in replay.records] == [r.scores for r in res.records]


def _sd(values: list[int]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def test_logprobs_give_the_expected_score(tmp_path: Path, server: JudgeServer) -> None:
    recs = records(3)
    res = evaluate(recs, ["judge:fluency", RELEVANCE], judge=opts(server, tmp_path,
                                                                 logprobs=True), bootstrap=10)
    assert all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in server.bodies)
    fluency = load_rubric("fluency")
    for row, record in zip(res.records, recs, strict=True):
        score = judge_score(render(fluency, record)[-1]["content"])
        dist = score_distribution(score, 1, 5)
        assert row.scores["judge:fluency"] == pytest.approx(sum(s * p for s, p in dist.items()))
        shown = row.details["judge:fluency"]["distribution"]
        assert shown == pytest.approx({str(s): p for s, p in dist.items()})
        expected_grades = [sum(s * p for s, p in score_distribution(g, 0, 3).items())
                           for g in grades(record)]
        assert row.scores[RELEVANCE] == pytest.approx(sum(expected_grades) / 3)
    assert "score:logprobs" in res.summary["judge:fluency"].signature
    # The log-probabilities are cached with the reply: the replay reproduces the values.
    before = server.requests
    replay = evaluate(recs, ["judge:fluency", RELEVANCE],
                      judge=opts(None, tmp_path, offline=True, logprobs=True), bootstrap=10)
    assert server.requests == before
    assert [r.scores for r in replay.records] == [r.scores for r in res.records]


def test_endpoint_without_logprobs_is_an_error(tmp_path: Path, server: JudgeServer) -> None:
    server.always = "no_logprobs"
    with pytest.raises(RagevalError, match="returned no log-probabilities"):
        evaluate(records(6), ["judge:fluency"],
                 judge=opts(server, tmp_path, logprobs=True, concurrency=2), bootstrap=10)
    assert server.requests <= 2  # stopped at once: nothing beyond what was in flight
    with JudgeCache(tmp_path / "cache.sqlite") as cache:
        assert len(cache) == 0


# -- cost, JSONL replay, options -----------------------------------------------------------


def test_cost_in_the_manifest(tmp_path: Path, server: JudgeServer) -> None:
    recs = records(2)
    priced = opts(server, tmp_path, price_in=2.0, price_out=8.0)
    res = evaluate(recs, ["judge:fluency"], judge=priced, bootstrap=10)
    judge = res.manifest["judge"]
    usage = judge["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    want = (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6
    assert judge["cost_usd"]["this_run"] == pytest.approx(want, abs=1e-6)
    assert judge["cost_usd"]["replayed_from_cache"] == 0
    replay = evaluate(recs, ["judge:fluency"],
                      judge=opts(None, tmp_path, offline=True, price_in=2.0, price_out=8.0),
                      bootstrap=10)
    cost = replay.manifest["judge"]["cost_usd"]
    assert cost["this_run"] == 0 and cost["replayed_from_cache"] == pytest.approx(want, abs=1e-6)
    assert replay.manifest["judge"]["cached_usage"] == usage


def test_jsonl_export_replays_offline(tmp_path: Path, server: JudgeServer) -> None:
    recs = records(2)
    first = evaluate(recs, ["judge:fluency"], judge=opts(server, tmp_path), bootstrap=10)
    export = tmp_path / "shared" / "judge.jsonl"
    export.parent.mkdir()
    with JudgeCache(tmp_path / "cache.sqlite") as cache:
        cache.export_jsonl(export)
    replay = evaluate(recs, ["judge:fluency"],
                      judge=opts(None, tmp_path, cache=str(export), offline=True), bootstrap=10)
    assert [r.scores for r in replay.records] == [r.scores for r in first.records]
    assert sorted(os.listdir(export.parent)) == ["judge.jsonl"]  # nothing written beside it
    with pytest.raises(UsageError, match="can only be replayed"):
        evaluate(recs, ["judge:fluency"], judge=opts(server, tmp_path, cache=str(export)))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("samples", 0, "samples must be an integer from 1 to 1,000"),
    ("samples", 10**20, "samples must be an integer from 1 to 1,000"),
    ("temperature", 3.0, "temperature must be between 0 and 2"),
    ("price_in", -1.0, "must be a non-negative price"),
    ("seed", -5, "seed must be an integer of at least 0"),
])
def test_bad_judge_options(tmp_path: Path, field: str, value: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        evaluate(records(1), ["judge:fluency"], judge=opts(None, tmp_path, **{field: value}))


def test_metrics_lists_rubrics(tmp_path: Path) -> None:
    mine = tmp_path / "tone.toml"
    source = load_rubric("fluency").source
    mine.write_text(Path(source).read_text().replace('id = "fluency"', 'id = "tone"'))
    out = io.StringIO()
    assert main(["metrics", "--prompts-dir", str(tmp_path)], stdout=out) == 0
    text = out.getvalue()
    for name in ("judge:faithfulness", "judge:context_relevance", "judge:tone"):
        assert name in text
    assert "0-3 (each context)" in text


# -- request counts across a kill ----------------------------------------------------------


def _key(body: dict) -> str:
    params = {k: body[k] for k in ("temperature", "seed") if k in body}
    return cache_key(body["model"], body["messages"], params, body.get("response_format"), 0)


@pytest.mark.slow
def test_sigkill_then_restart_repeats_no_stored_request(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(_as_json(r)) + "\n" for r in records(40)))
    cache = tmp_path / "cache.sqlite"
    argv = ["score", str(path), "-m", "judge:fluency", "--judge-model", "m",
            "--cache", str(cache), "--judge-concurrency", "4", "--no-progress"]
    with JudgeServer(latency_s=0.05) as server:
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; from rageval.cli import main; "
             "sys.exit(main(sys.argv[1:]))", *argv, "--judge-base-url", server.base_url],
            cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": ""},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while server.requests < 12 and time.monotonic() < deadline:
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait()
        with JudgeCache(cache) as c:
            stored = {e.key for e in c.entries()}
        assert 0 < len(stored) < 40
        first = server.requests
        assert main([*argv, "--judge-base-url", server.base_url], stdout=io.StringIO()) == 0
        again = [_key(b) for b in server.bodies[first:]]
        assert not stored.intersection(again)  # nothing stored is asked for again
        assert len(again) == 40 - len(stored)
        assert len(set(again)) == len(again)


def test_metric_keys_are_the_clients_keys() -> None:
    """The metric computes cache keys without a client; they must be the keys of the requests
    the client sends (seed per sample, logprobs parameters, response format)."""
    from rageval.core.metric import ScoreOptions
    from rageval.judge.llm.transport.client import JudgeClient, JudgeRequest
    from rageval.judge.llm.transport.formats import WIRE_FORMATS
    from rageval.judge.rubric.metric import JudgeMetric

    for kw in ({}, {"seed": 5, "samples": 3, "temperature": 0.5}, {"logprobs": True},
               {"response_format": "json_object"}, {"response_format": "text"}):
        judge = JudgeOptions(model="m", **kw)  # type: ignore[arg-type]
        metric = JudgeMetric("context_relevance", options=ScoreOptions(judge=judge))
        client = JudgeClient(replace(judge, base_url="http://127.0.0.1:9/v1"))
        schema = metric.reply_schema()
        for unit in metric.units(records(1)[0]):
            assert tuple(unit.keys) == client.ladder
            assert set(unit.keys) <= set(WIRE_FORMATS)
            seed = None if judge.seed is None else judge.seed + unit.sample
            request = JudgeRequest(unit.messages, schema, unit.sample, seed=seed)
            for fmt, key in unit.keys.items():
                assert client.cache_key(request, fmt) == key
            # The json_schema key is what the request with OpenAI's response_format hashes to.
            if "json_schema" in unit.keys:
                assert unit.keys["json_schema"] == cache_key(
                    "m", unit.messages, client.params(request),
                    response_format(metric.rubric), unit.sample)


def test_batches_share_one_stream_of_requests(tmp_path: Path, server: JudgeServer) -> None:
    """Small scoring batches do not split the judge's work: the first batch asks for every
    record of the run in one stream (the progress total is the run's), later batches reuse it."""
    seen: list[tuple[int, int]] = []
    judge = opts(server, tmp_path, progress=lambda p: seen.append((p.done, p.total)))
    recs = records(6)
    res = evaluate(recs, ["judge:fluency"], judge=judge, batch_size=2, bootstrap=1)
    assert server.requests == 6
    assert {total for _, total in seen} == {6} and max(done for done, _ in seen) == 6
    assert all(not math.isnan(r.scores["judge:fluency"]) for r in res.records)
    assert res.manifest["judge"]["cache"]["misses"] == 6


def test_a_rubric_beside_judged_judgments_asks_only_for_itself(tmp_path: Path,
                                                               server: JudgeServer) -> None:
    """The judgments are graded before the run's judge metrics share one stream: the rubric
    asks for its own replies only (no look-up of the grades again: no cache hit counted)."""
    recs = records(3)
    res = evaluate(recs, ["ndcg@3", "judge:fluency"], judge=opts(server, tmp_path),
                   judgments_from="judge", bootstrap=10)
    assert server.requests == 9 + 3
    assert res.manifest["judge"]["cache"]["hits"] == 0
    assert res.manifest["judge"]["cache"]["misses"] == 9 + 3
    assert res.summary["judge:fluency"].n == 3
