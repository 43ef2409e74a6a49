"""--judge-batch: a run's judge requests go through the provider's batch API, and the run
scores as an online run does: the same values, the same cache keys, the failed lines unscored
with the provider's reason, at the batch's share of the prices, replayed offline with no
request at all."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from batch_server import BatchServer
from judge_server import TEST_KEY, TEST_KEY_ENV, JudgeServer, keyed_options
from judge_server import fact_records as facts

from rageval.api import evaluate
from rageval.judge.llm.batch.state import state_path
from rageval.judge.llm.cache.store import JudgeCache
from rageval.judge.llm.options import JudgeOptions

METRICS = ["judge:faithfulness", "judge:correctness"]
PRICES = {"price_in": 2.0, "price_out": 8.0}


def fact_records(tmp_path: Path, n: int) -> Path:
    return facts(tmp_path / "r.jsonl", n, reference=True)


def batch_judge(server: BatchServer, cache: Path, **kw: object) -> JudgeOptions:
    return keyed_options(server, cache, **{"batch": True, "batch_poll": 0.05, **PRICES, **kw})


def scores(results: object) -> dict[tuple[str, str], float]:
    return {(r.id, m): v for r in results.records  # type: ignore[attr-defined]
            for m, v in r.scores.items() if v is not None and not math.isnan(v)}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)


def test_a_batch_run_scores_as_an_online_run_at_half_the_cost_and_replays_offline(
        tmp_path: Path) -> None:
    records = fact_records(tmp_path, 12)
    with BatchServer() as server:
        server.slow_polls = 2
        server.line_faults = {"Fact 3 is blue.": "400", "Fact 7 is blue.": "error"}
        batch = evaluate(records, METRICS, bootstrap=1,
                         judge=batch_judge(server, tmp_path / "b.sqlite"))
        assert server.chats == 0 and server.created == 1 and server.uploads == 1
        failed_messages = list(server.faulted)
        # Replayed offline: no request of any kind reaches the server.
        looks = dict(server.looks)
        replay = evaluate(records, METRICS, bootstrap=1, judge=batch_judge(
            server, tmp_path / "b.sqlite", batch=False, offline=True, allow_missing=True))
        assert (server.chats, server.uploads, server.created, server.looks) == (0, 1, 1, looks)
    with JudgeServer() as online_server:
        for message in failed_messages:  # the online judge fails the same requests
            online_server.fail_for(message, "500", "500")
        online = evaluate(records, METRICS, bootstrap=1,
                          judge=keyed_options(online_server, tmp_path / "o.sqlite", **PRICES))
    # Every record the online run scores, with the same value; the failed lines unscored.
    assert scores(batch) == scores(online) == scores(replay)
    assert len(scores(batch)) == 2 * 12 - len(failed_messages)
    reasons = {e for r in batch.records for e in r.errors.values()}
    assert reasons == {"judge request failed: HTTP 400: scripted HTTP 400 for this line",
                       "judge request failed: server_error: The request could not be "
                       "processed."}
    # The same cache keys and replies as the online run's.
    with JudgeCache(tmp_path / "b.sqlite") as b, JudgeCache(tmp_path / "o.sqlite") as o:
        by_batch = {e.key: e for e in b.entries()}
        assert by_batch.keys() == {e.key for e in o.entries()}
        assert {e.key: e.reply_text for e in o.entries()} == {k: e.reply_text
                                                              for k, e in by_batch.items()}
        assert all(e.meta["via"] == "batch" and e.meta["batch"] for e in by_batch.values())
    section = batch.manifest["judge"]
    assert section["usage"] == online.manifest["judge"]["usage"]
    assert section["batch"]["replies"] == len(by_batch)
    assert section["cost_usd"]["this_run"] == pytest.approx(
        online.manifest["judge"]["cost_usd"]["this_run"] / 2, abs=2e-6)
    assert section["cost_usd"]["batch_discount"] == 0.5
    from rageval.cli.progress import final_line

    assert f"{len(by_batch)} by batch at 50% of the prices" in final_line(batch)
    assert replay.manifest["judge"]["requests"] == 0
    assert not state_path(str(tmp_path / "b.sqlite")).exists()  # finished: forgotten


def test_a_rerun_asks_by_batch_only_for_what_the_cache_lacks(tmp_path: Path) -> None:
    records = fact_records(tmp_path, 6)
    with BatchServer() as server:
        server.line_faults = {"Fact 2 is blue.": "500"}
        first = evaluate(records, METRICS, bootstrap=1,
                         judge=batch_judge(server, tmp_path / "c.sqlite"))
        assert len(scores(first)) == 10
        server.line_faults = {}
        again = evaluate(records, METRICS, bootstrap=1,
                         judge=batch_judge(server, tmp_path / "c.sqlite"))
        assert server.created == 2 and len(list(server.lines_of.values())[-1]) == 2
    assert len(scores(again)) == 12
    assert again.manifest["judge"]["cache"]["hits"] == 10


def test_lines_refused_for_their_response_format_go_again_in_the_next_format(
        tmp_path: Path) -> None:
    records = fact_records(tmp_path, 4)
    with BatchServer() as server:
        server.refuse = {"json_schema"}
        results = evaluate(records, ["judge:faithfulness"], bootstrap=1,
                           judge=batch_judge(server, tmp_path / "c.sqlite"))
        formats = [{json.dumps(line["body"].get("response_format", {}).get("type"))
                    for line in lines} for lines in server.lines_of.values()]
    assert formats == [{'"json_schema"'}, {'"json_object"'}]
    assert len(scores(results)) == 4
    used = results.manifest["judge"]["response_format"]
    assert used["used"] == {"json_object+schema": 4} and "json_schema" in used["refused"]


def test_an_expired_batch_keeps_its_answered_lines_and_sends_the_rest_again(
        tmp_path: Path) -> None:
    records = fact_records(tmp_path, 5)
    with BatchServer() as server:
        server.expire_after.append(3)
        results = evaluate(records, ["judge:faithfulness"], bootstrap=1,
                           judge=batch_judge(server, tmp_path / "c.sqlite"))
        sizes = [len(lines) for lines in server.lines_of.values()]
    assert sizes == [5, 2] and len(scores(results)) == 5


def test_an_upload_the_server_fails_once_is_retried(tmp_path: Path) -> None:
    records = fact_records(tmp_path, 3)
    with BatchServer() as server:
        server.upload_faults.append(500)
        results = evaluate(records, ["judge:faithfulness"], bootstrap=1,
                           judge=batch_judge(server, tmp_path / "c.sqlite"))
        assert server.uploads == 2 and server.created == 1
    assert len(scores(results)) == 3


def test_a_batch_over_the_limits_is_split(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval.judge.llm.batch import lines

    monkeypatch.setattr(lines, "MAX_REQUESTS", 4)
    records = fact_records(tmp_path, 10)
    with BatchServer() as server:
        results = evaluate(records, ["judge:faithfulness"], bootstrap=1,
                           judge=batch_judge(server, tmp_path / "c.sqlite"))
        assert [len(v) for v in server.lines_of.values()] == [4, 4, 2]
    assert len(scores(results)) == 10
    assert len(results.manifest["judge"]["batch"]["batches"]) == 3


def test_batch_lines_are_the_online_requests(tmp_path: Path) -> None:
    records = fact_records(tmp_path, 2)
    with BatchServer() as server:
        evaluate(records, ["judge:faithfulness"], bootstrap=1,
                 judge=batch_judge(server, tmp_path / "c.sqlite", seed=3, max_tokens=50))
        lines = [line for batch in server.lines_of.values() for line in batch]
    with JudgeServer() as online_server:
        evaluate(records, ["judge:faithfulness"], bootstrap=1,
                 judge=keyed_options(online_server, tmp_path / "o.sqlite", seed=3,
                                     max_tokens=50))
        bodies = online_server.bodies
    assert sorted(json.dumps(b, sort_keys=True) for b in bodies) == sorted(
        json.dumps(line["body"], sort_keys=True) for line in lines)
    assert {line["url"] for line in lines} == {"/v1/chat/completions"}
    with JudgeCache(tmp_path / "o.sqlite") as cache:
        assert {e.key for e in cache.entries()} == {line["custom_id"] for line in lines}


def test_batch_options_are_checked(tmp_path: Path) -> None:
    from rageval.core.errors import UsageError

    with pytest.raises(UsageError, match="--offline"):
        JudgeOptions(model="m", batch=True, offline=True).check()
    with pytest.raises(UsageError, match="--judge-batch-discount"):
        JudgeOptions(model="m", batch=True, batch_discount=1.5).check()
    with pytest.raises(UsageError, match="give both"):
        JudgeOptions(model="m", batch_file=str(tmp_path / "b.jsonl")).check()
    with pytest.raises(UsageError, match="does not apply with --engine ray"):
        JudgeOptions(model="m", batch=True).for_workers(2)
    assert replace(JudgeOptions(model="m"), batch=True).batch_cost(
        {"prompt_tokens": 10**6}) is None


def test_a_dry_run_shows_the_batch_plan_at_batch_prices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rageval.cli import main
    from rageval.judge.llm.batch import lines

    monkeypatch.setattr(lines, "MAX_REQUESTS", 5)
    records = fact_records(tmp_path, 6)
    with BatchServer() as server:
        kw = {"max_tokens": 50, "dry_run": True}
        online = evaluate(records, METRICS, bootstrap=1, judge=keyed_options(
            server, tmp_path / "c.sqlite", **PRICES, **kw))
        batch = evaluate(records, METRICS, bootstrap=1,
                         judge=batch_judge(server, tmp_path / "c.sqlite", **kw))
        out = io.StringIO()
        argv = ["score", str(records), "-m", METRICS[0], "-m", METRICS[1], "--judge-model",
                "judge-model", "--judge-base-url", server.base_url, "--judge-api-key-env",
                TEST_KEY_ENV, "--cache", str(tmp_path / "c.sqlite"), "--judge-batch",
                "--judge-max-tokens", "50", "--dry-run", "--no-progress"]
        assert main(argv, stdout=out) == 0
        assert (server.uploads, server.created, server.chats) == (0, 0, 0)
    plan = batch.manifest["judge"]["batch_plan"]
    assert (plan["batches"], plan["requests"], plan["discount"]) == (3, 12, 0.5)
    for kind, planned in batch.manifest["judge"]["dry_run"].items():
        full = online.manifest["judge"]["dry_run"][kind]["cost_usd"]
        assert planned["cost_usd"] == pytest.approx(full / 2, abs=2e-6)
    text = " ".join(out.getvalue().split())
    assert "by batch: 12 requests in 3 batch(es)" in text and "at 50% of the prices" in text


def test_a_batch_file_for_an_offline_runner_and_its_output_imported(tmp_path: Path) -> None:
    """--judge-batch-file writes the batch and sends nothing; the runner's output (here the
    loopback provider's answers to the same lines) imported into the cache replays as the
    online replies do."""
    import io

    from rageval.cli import main

    records = fact_records(tmp_path, 4)
    batch_file = tmp_path / "batch.jsonl"
    with BatchServer() as server:
        written = evaluate(records, METRICS, bootstrap=1, judge=batch_judge(
            server, tmp_path / "c.sqlite", batch_file=str(batch_file)))
        assert (server.uploads, server.created, server.chats) == (0, 0, 0)
        reasons = {e for r in written.records for e in r.errors.values()}
        assert len(reasons) == 1 and "written to" in reasons.pop()
        # Written again: the lines already in the file are not added twice.
        evaluate(records, METRICS, bootstrap=1, judge=batch_judge(
            server, tmp_path / "c.sqlite", batch_file=str(batch_file)))
        lines = [json.loads(line) for line in batch_file.read_text().splitlines()]
        assert len(lines) == 8
        server.line_faults = {"Fact 1 is blue.": "400"}
        output = tmp_path / "out.jsonl"
        output.write_text("".join(json.dumps(server._line(line)) + "\n" for line in lines))
        out = io.StringIO()
        assert main(["cache", "import", str(output), "--batch-input", str(batch_file),
                     "--cache", str(tmp_path / "c.sqlite")], stdout=out) == 0
        assert "added 6 replies" in out.getvalue() and "2 lines without a reply" in out.getvalue()
        replay = evaluate(records, METRICS, bootstrap=1, judge=batch_judge(
            server, tmp_path / "c.sqlite", batch=False, offline=True, allow_missing=True))
    with JudgeServer() as online_server:
        online = evaluate(records, METRICS, bootstrap=1,
                          judge=keyed_options(online_server, tmp_path / "o.sqlite"))
    assert scores(replay) == {k: v for k, v in scores(online).items() if k[0] != "q1"}
    # Without --batch-input the output is recognised and refused with what to give.
    assert main(["cache", "import", str(output), "--cache", str(tmp_path / "c.sqlite")],
                stdout=io.StringIO()) == 2
    # An output line that is no chat reply counts as a line without one; an output that
    # cannot be read is named (exit 2), never a traceback.
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"custom_id": lines[0]["custom_id"], "response": {
        "status_code": 200, "body": {"choices": ["x"]}}}) + "\n")
    out = io.StringIO()
    assert main(["cache", "import", str(odd), "--batch-input", str(batch_file),
                 "--cache", str(tmp_path / "c.sqlite")], stdout=out) == 0
    assert "1 lines without a reply" in out.getvalue()
    (tmp_path / "latin1.jsonl").write_bytes(b'{"custom_id": "\xe9", "response": {}}\n')
    for bad in ("latin1.jsonl", "missing.jsonl"):
        assert main(["cache", "import", str(tmp_path / bad), "--batch-input", str(batch_file),
                     "--cache", str(tmp_path / "c.sqlite")], stdout=io.StringIO()) == 2


def test_claim_level_steps_go_by_batch_and_score_as_online(tmp_path: Path) -> None:
    records = fact_records(tmp_path, 3)
    with BatchServer() as server:
        batch = evaluate(records, ["claims:faithfulness"], bootstrap=1,
                         judge=batch_judge(server, tmp_path / "b.sqlite"))
        assert server.chats == 0 and server.created >= 2  # one batch per round of steps
    with JudgeServer() as online_server:
        online = evaluate(records, ["claims:faithfulness"], bootstrap=1,
                          judge=keyed_options(online_server, tmp_path / "o.sqlite"))
    assert scores(batch) == scores(online) and len(scores(batch)) == 3
    assert batch.manifest["claims"]["batch"]["replies"] == batch.manifest["claims"]["requests"]


def test_a_failed_batch_leaves_its_records_unscored_with_its_errors(tmp_path: Path) -> None:
    records = fact_records(tmp_path, 2)
    with BatchServer() as server:
        server.fail_batches = 1
        results = evaluate(records, ["judge:faithfulness"], bootstrap=1,
                           judge=batch_judge(server, tmp_path / "c.sqlite"))
    reasons = {e for r in results.records for e in r.errors.values()}
    assert len(reasons) == 1 and "failed: the input file holds a bad line" in reasons.pop()


def test_an_unreadable_record_of_batches_is_named(tmp_path: Path) -> None:
    from rageval.core.errors import InputError

    cache = tmp_path / "c.sqlite"
    state_path(str(cache)).write_text("{not json")
    records = fact_records(tmp_path, 1)
    with BatchServer() as server, pytest.raises(InputError, match=r"c\.sqlite\.batches\.json"):
        evaluate(records, ["judge:faithfulness"], bootstrap=1, judge=batch_judge(server, cache))


def test_a_reasoning_model_by_batch_gets_its_parameters_adapted_and_scores_as_online(
        tmp_path: Path) -> None:
    records = fact_records(tmp_path, 4)
    settings = {"max_tokens": 256, "temperature": 0.0}
    with BatchServer() as server:
        server.judge.reasoning = True  # refuses max_tokens, then a temperature other than 1
        batch = evaluate(records, METRICS, bootstrap=1,
                         judge=batch_judge(server, tmp_path / "b.sqlite", **settings))
        # One batch refused for each parameter, each adapted once; the third one answered.
        assert (server.chats, server.created) == (0, 3)
        replay = evaluate(records, METRICS, bootstrap=1, judge=batch_judge(
            server, tmp_path / "b.sqlite", batch=False, offline=True, **settings))
        assert (server.chats, server.created) == (0, 3)
    with JudgeServer(reasoning=True) as online_server:
        online = evaluate(records, METRICS, bootstrap=1, judge=keyed_options(
            online_server, tmp_path / "o.sqlite", **settings))
    assert len(scores(batch)) == 2 * 4
    assert scores(batch) == scores(online) == scores(replay)
    for run in (batch, replay):
        for metric in METRICS:
            assert "|temperature:default|" in run.summary[metric].signature
    with JudgeCache(tmp_path / "b.sqlite") as cache:
        sent = {json.dumps(e.meta["sent"], sort_keys=True) for e in cache.entries()}
    assert sent == {json.dumps({"max_completion_tokens": 256, "temperature": "default"},
                               sort_keys=True)}


def test_the_cost_cap_counts_batch_requests_at_the_batch_price() -> None:
    from rageval.judge.llm.costs.budget import RequestBudget

    def admitted(judge: JudgeOptions) -> int:
        budget = RequestBudget(max_cost=1.0)
        return sum(budget.admit(judge, 10**6) is None for _ in range(5))

    online = JudgeOptions(model="m", price_in=1.0, price_out=1.0, max_tokens=0, max_cost=1.0)
    assert admitted(online) == 1  # $1 a request
    assert admitted(replace(online, batch=True)) == 2  # $0.50 a request
    assert admitted(replace(online, batch=True, batch_discount=0.25)) == 4


def test_a_batch_round_settles_the_cost_estimates_of_the_caps(tmp_path: Path) -> None:
    from rageval.judge.llm.session import JudgeSession

    records = fact_records(tmp_path, 3)
    with BatchServer() as server:
        judge = batch_judge(server, tmp_path / "b.sqlite", max_cost=100.0,
                            session=JudgeSession())
        evaluate(records, METRICS, bootstrap=1, judge=judge)
    budget = judge.budget
    assert budget is not None and budget.sent == 6 and budget.spent > 0
    assert budget._estimated == 0  # what the replies cost replaced what was estimated


def test_a_reply_cut_at_its_token_limit_by_batch_fails_and_is_not_cached(
        tmp_path: Path) -> None:
    records = fact_records(tmp_path, 2)
    with BatchServer() as server:
        server.judge.reasoning = True
        server.judge.reasoning_tokens = 300  # more than the limit: nothing is left to reply
        results = evaluate(records, METRICS, bootstrap=1, judge=batch_judge(
            server, tmp_path / "b.sqlite", max_tokens=200, temperature=1.0))
    reasons = {e for r in results.records for e in r.errors.values()}
    assert len(reasons) == 1
    assert "reached its token limit (max_completion_tokens=200)" in reasons.pop()
    assert not scores(results)
    assert not (tmp_path / "b.sqlite").exists() or not len(JudgeCache(tmp_path / "b.sqlite"))


def test_a_refusal_that_cannot_be_adapted_stops_a_batch_run(tmp_path: Path) -> None:
    from judge_server import openai_refusal

    from rageval.judge.llm.transport.requests import JudgeError

    records = fact_records(tmp_path, 4)
    with BatchServer() as server:
        server.judge.param_refusals = {"reasoning_effort": (400, openai_refusal(
            "reasoning_effort"))}
        with pytest.raises(JudgeError, match="reasoning_effort"):
            evaluate(records, METRICS, bootstrap=1, window=2, judge=batch_judge(
                server, tmp_path / "b.sqlite", reasoning_effort="low"))
        assert server.created == 1  # not one refused batch per window


def test_a_recorded_batch_the_provider_does_not_know_is_forgotten_and_sent_again(
        tmp_path: Path) -> None:
    from rageval.judge.llm.batch.state import BatchState, Recorded
    from rageval.judge.llm.transport.endpoint import Endpoint

    records, cache = fact_records(tmp_path, 2), tmp_path / "b.sqlite"
    lines = tmp_path / "lines.jsonl"
    with BatchServer() as server:
        # The run's custom_ids, as a batch file for an offline runner holds them.
        evaluate(records, METRICS, bootstrap=1,
                 judge=batch_judge(server, cache, batch_file=str(lines)))
        ids = tuple(json.loads(line)["custom_id"] for line in lines.read_text().splitlines())
        state = BatchState(state_path(str(cache)))
        state.add(Recorded("file-gone", "batch_gone", Endpoint.of(server.base_url).public,
                           "judge-model", "json_schema", ids))
        results = evaluate(records, METRICS, bootstrap=1, judge=batch_judge(server, cache))
        assert server.created == 1  # the batch sent anew
    assert len(scores(results)) == 4
    assert not state_path(str(cache)).exists()


@pytest.mark.parametrize("killed_in", ["create", "record"])
def test_a_run_killed_around_creating_its_batch_pays_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, killed_in: str) -> None:
    """Killed after the upload, before the batch is created ("create") or before its id is
    recorded ("record"): the rerun finds the batch by its file, or creates it from the file."""
    from rageval.judge.llm.batch.provider import BatchProvider
    from rageval.judge.llm.batch.state import BatchState

    def killed(*args: object) -> None:
        raise KeyboardInterrupt

    records, cache = fact_records(tmp_path, 2), tmp_path / "b.sqlite"
    with BatchServer() as server, monkeypatch.context() as patch:
        if killed_in == "create":
            patch.setattr(BatchProvider, "create", killed)
        else:  # the batch is created; the kill comes as its id is recorded
            patch.setattr(BatchState, "update", killed)
        with pytest.raises(KeyboardInterrupt):
            evaluate(records, METRICS, bootstrap=1, judge=batch_judge(server, cache))
        patch.undo()
        assert server.uploads == 1 and server.created == (killed_in == "record")
        assert [r.id for r in BatchState(state_path(str(cache))).load()] == [""]
        results = evaluate(records, METRICS, bootstrap=1, judge=batch_judge(server, cache))
        assert (server.uploads, server.created, server.chats) == (1, 1, 0)
    assert len(scores(results)) == 4
