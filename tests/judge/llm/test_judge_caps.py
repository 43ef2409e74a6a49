"""--judge-max-requests and --judge-max-cost: a run stops asking its judge at its cap, keeps
every reply it received, leaves the rest unscored with the reason and exits with status 4; a
rerun with a higher cap asks only for what is missing."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import TEST_KEY_ENV, JudgeServer, keyed_options

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import UsageError
from rageval.core.metric import ScoreOptions
from rageval.core.records import records_from_dicts
from rageval.core.registry import create
from rageval.judge.llm.costs.tokens import PromptTokens
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.rubric.render import render

METRICS = ["judge:faithfulness", "judge:correctness"]



def _records(path: Path, n: int = 10) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"q{i}", "query": f"What is fact {i}?", "contexts": [f"Fact {i} is blue."],
        "answer": f"Fact {i}: blue.", "reference": "Blue."}) + "\n" for i in range(n)))
    return path


def _judge(keyed_judge: JudgeServer, cache: Path, **kw: object) -> JudgeOptions:
    return keyed_options(keyed_judge, cache, **{"concurrency": 4, **kw})


def test_a_request_cap_stops_the_run_and_a_higher_one_asks_only_for_the_rest(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    records = _records(tmp_path / "r.jsonl")
    capped = evaluate(records, METRICS, bootstrap=1,
                      judge=_judge(keyed_judge, tmp_path / "c.sqlite", max_requests=7))
    assert keyed_judge.requests == 7
    caps = capped.manifest["judge"]["caps"]
    assert caps == {"max_requests": 7, "max_cost_usd": None,
                    "reached": "--judge-max-requests 7", "not_sent": 13}
    reasons = [e for r in capped.records for e in r.errors.values()]
    assert reasons.count("not asked: the run reached its judge cap "
                         "(--judge-max-requests 7)") == 13
    assert sum(s.n for s in capped.summary.values()) == 7
    again = evaluate(records, METRICS, bootstrap=1,
                     judge=_judge(keyed_judge, tmp_path / "c.sqlite", max_requests=20))
    assert keyed_judge.requests == 20  # the 13 missing, and not one of the 7 cached
    assert again.manifest["judge"]["caps"]["not_sent"] == 0
    assert again.manifest["judge"]["cache"]["hits"] == 7


def test_a_cost_cap_stops_before_the_request_that_would_pass_it(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    records = _records(tmp_path / "r.jsonl")
    # A request costs its prompt (completions are priced at 0), at 1,000 USD a million
    # tokens: a few requests fit under 2 USD.
    judge = _judge(keyed_judge, tmp_path / "c.sqlite", price_in=1000.0, price_out=0.0,
                   max_tokens=1, max_cost=2.0, concurrency=1)
    results = evaluate(records, ["judge:faithfulness"], bootstrap=1, judge=judge)
    spent = results.manifest["judge"]["cost_usd"]["this_run"]  # what the cap counted
    assert spent <= 2.0
    sent = results.manifest["judge"]["requests"]
    assert 0 < sent < 10 and results.manifest["judge"]["caps"]["not_sent"] == 10 - sent
    # Requests are admitted while their estimates (the prompt, counted as a dry run counts
    # it) fit under the cap: those sent are the longest run of records that fits.
    metric = create("judge:faithfulness", ScoreOptions(judge=judge))
    counter = PromptTokens(keyed_judge.base_url)
    estimates = [counter.count(render(metric.rubric, record)) * 1000.0 / 1e6 for record in
                 records_from_dicts([json.loads(line) for line in
                                     records.read_text().splitlines()])]
    assert sum(estimates[:sent]) <= 2.0 < sum(estimates[:sent + 1])


def test_caps_are_checked_and_the_command_line_exits_4(tmp_path: Path,
                                                       keyed_judge: JudgeServer) -> None:
    with pytest.raises(UsageError, match="--judge-max-cost needs the prices"):
        JudgeOptions(model="m", max_cost=1.0).check()
    with pytest.raises(UsageError, match="--judge-max-requests must be an integer of at least 1"):
        JudgeOptions(model="m", max_requests=0).check()
    with pytest.raises(UsageError, match="do not apply with --engine ray"):
        JudgeOptions(model="m", max_requests=3).for_workers(2)
    records = _records(tmp_path / "r.jsonl", 4)
    out, err = io.StringIO(), io.StringIO()
    argv = ["score", str(records), "-m", "judge:faithfulness", "--judge-model", "judge-model",
            "--judge-base-url", keyed_judge.base_url, "--judge-api-key-env", TEST_KEY_ENV,
            "--cache", str(tmp_path / "c.sqlite"), "--judge-max-requests", "3", "--bootstrap", "10",
            "--no-progress", "--out", str(tmp_path / "run")]
    sys_err, sys.stderr = sys.stderr, err
    try:
        assert main(argv, stdout=out) == 4
    finally:
        sys.stderr = sys_err
    assert "the run reached its judge cap (--judge-max-requests 3): 1 request not sent" in (
        err.getvalue())
    assert (tmp_path / "run" / "summary.json").exists()  # the run is written, then exits 4
