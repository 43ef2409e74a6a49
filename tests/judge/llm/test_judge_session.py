"""A run's judge state is the run's own (JudgeSession): two runs in one process, in threads,
with different endpoints, or reusing the same options, share none of it."""

from __future__ import annotations

import pickle
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import TEST_KEY, TEST_KEY_ENV, JudgeServer, fact_records, keyed_options

from rageval.api import evaluate
from rageval.core.results import Results
from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.session import JudgeSession
from rageval.judge.pairwise.metric import load_opponent


def _run(records: Path, judge: JudgeOptions) -> Results:
    return evaluate(records, ["judge:faithfulness"], bootstrap=1, judge=judge)


def test_two_runs_in_threads_with_different_endpoints_share_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    records = fact_records(tmp_path / "r.jsonl", 5)
    with JudgeServer(expected_key=TEST_KEY) as a, JudgeServer(expected_key=TEST_KEY) as b:
        a.refuse = {"json_schema": 400}  # a negotiates down to json_object, b does not
        on_a = keyed_options(a, tmp_path / "a.sqlite", max_requests=3, concurrency=2)
        on_b = replace(on_a, base_url=b.base_url, cache=str(tmp_path / "b.sqlite"))
        with ThreadPoolExecutor(2) as pool:
            first, second = pool.map(lambda judge: _run(records, judge), (on_a, on_b))
        # Each run keeps its own cap: three requests each, not three between them.
        for results in (first, second):
            assert results.manifest["judge"]["requests"] == 3
            assert results.manifest["judge"]["caps"]["not_sent"] == 2
        assert first.manifest["judge"]["response_format"]["used"] == {"json_object+schema": 3}
        assert second.manifest["judge"]["response_format"]["used"] == {"json_schema": 3}
        assert on_a.budget is not None and on_a.budget.sent == 0  # the options' own: unused
        # The same options again: a fresh cap, the three cached replies reused.
        again = _run(records, on_a)
    assert again.manifest["judge"]["requests"] == 2
    assert again.manifest["judge"]["cache"]["hits"] == 3
    assert again.manifest["judge"]["caps"]["not_sent"] == 0


def test_a_session_reads_the_other_systems_answers_once(tmp_path: Path) -> None:
    other = fact_records(tmp_path / "other.jsonl", 5)
    mine, theirs = JudgeSession(), JudgeSession()
    first = load_opponent(str(other), mine)
    assert load_opponent(str(other), mine) is first
    assert load_opponent(str(other), theirs) is not first  # another run reads it itself
    assert load_opponent(str(other), theirs).digest == first.digest


def test_copies_of_the_options_keep_their_session_and_a_bound_copy_gets_its_own() -> None:
    judge = JudgeOptions(model="m", max_requests=2)
    assert replace(judge, temperature=0.5).session is judge.session
    bound = judge.bound()
    assert bound.session is not judge.session and bound == judge  # same configuration
    assert bound.budget is not None and bound.budget is not judge.budget
    member_session = {m.session for _, m in
                      replace(bound, panel=({"model": "a"}, {"model": "b"})).members()}
    assert member_session == {bound.session}


def test_a_session_crosses_to_a_worker_without_its_state() -> None:
    session = JudgeSession()
    session.backends.get(JudgeConfig(model="m", base_url="http://x/v1", api_key_env="K"))
    copy = pickle.loads(pickle.dumps(JudgeOptions(model="m", session=session)))
    assert copy.session is not session
    # Built anew there: the caller's backends stay with the caller.
    assert len(copy.session.backends) == 0 and len(session.backends) == 1


def test_a_metric_built_before_the_run_judges_with_the_runs_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric object made with the options (before the run bound its session) takes the
    run's session, as metrics named by string do: each run has its own cap."""
    from rageval.core.metric import ScoreOptions
    from rageval.core.registry import create

    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    records = fact_records(tmp_path / "r.jsonl", 5)
    with JudgeServer(expected_key=TEST_KEY) as server:
        judge = keyed_options(server, tmp_path / "c.sqlite", max_requests=3, concurrency=1,
                              refresh=True)
        metric = create("judge:faithfulness", ScoreOptions(judge=judge))
        for _ in range(2):
            results = evaluate(records, [metric], bootstrap=1, judge=judge)
            assert results.manifest["judge"]["requests"] == 3
    assert judge.budget is not None and judge.budget.sent == 0


def test_model_and_endpoint_may_be_given_in_order_the_rest_by_keyword() -> None:
    judge = JudgeOptions("m", "http://127.0.0.1:9/v1", temperature=0.5)
    assert (judge.model, judge.base_url, judge.temperature) == ("m", "http://127.0.0.1:9/v1", 0.5)
    with pytest.raises(TypeError):
        JudgeOptions("m", "http://127.0.0.1:9/v1", "cache.sqlite")  # type: ignore[misc]


def test_a_shared_session_keeps_the_caps_first_given_and_refuses_others() -> None:
    from rageval.core.errors import UsageError

    session = JudgeSession()
    uncapped = JudgeOptions(model="m", session=session)
    assert uncapped.budget is None
    capped = JudgeOptions(model="m", max_requests=5, session=session)
    assert capped.budget is session.budget and session.budget is not None
    assert replace(capped, temperature=0.5).budget is session.budget  # same caps: shared
    with pytest.raises(UsageError, match=r"max_requests=5.*cannot share it"):
        JudgeOptions(model="m", max_requests=6, session=session)


def test_the_metrics_of_a_run_reach_a_worker_with_one_session() -> None:
    """The workers' options of several metrics share one session, so that once sent together
    to a worker the metrics learn of each endpoint once there."""
    judge = JudgeOptions(model="m").bound()
    rubric = judge.for_workers(4)
    claims = replace(judge, samples=2).for_workers(4)
    assert rubric.session is claims.session and rubric.session is not judge.session
    rubric_there, claims_there = pickle.loads(pickle.dumps([rubric, claims]))
    assert rubric_there.session is claims_there.session
