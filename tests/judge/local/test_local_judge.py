"""Every judge path against a real model: SmolLM2-135M-Instruct served by llama-cpp-python
(``rageval local-judge``). The model is small and often wrong, so these tests check what must
hold whatever it says: every judgment is scored on the rubric's scale or unscored with a reason,
the negotiated response format, and an offline replay that reproduces every number with no
request. Skipped, with the reason, without the ``local`` extra; CI installs it (and with
``CI=true`` a missing extra fails instead of skipping)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_model import need_local_extra

from rageval.api import evaluate
from rageval.core.results import Results
from rageval.judge.claims.metrics import NAMES
from rageval.judge.llm.options import JudgeOptions

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def local_judge() -> Iterator[object]:
    need_local_extra()
    from rageval.judge.local import LocalJudge

    with LocalJudge(port=0) as judge:
        yield judge


RECORDS = [
    {"id": "r1", "query": "When was the company founded?",
     "contexts": [{"id": "a", "text": "The company was founded in 1998 in Oslo."},
                  {"id": "b", "text": "Its main product is a ship navigation system."}],
     "answer": "It was founded in 1998.", "reference": "The company was founded in 1998."},
    {"id": "r2", "query": "How many employees does it have?",
     "contexts": [{"id": "a", "text": "The annual report lists 420 employees in 2023."},
                  {"id": "b", "text": "The company was founded in 1998 in Oslo."}],
     "answer": "About 4,000 people work there.", "reference": "It has 420 employees."},
]


def _write(path: Path, answers: dict[str, str] | None = None) -> Path:
    rows = [dict(r, answer=(answers or {}).get(r["id"], r["answer"])) for r in RECORDS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _judge(local_judge: object, cache: Path, **kw: object) -> JudgeOptions:
    return JudgeOptions(model=local_judge.name, base_url=local_judge.base_url,  # type: ignore[attr-defined]
                        cache=str(cache), concurrency=2, **kw)  # type: ignore[arg-type]


def _replay(records: Path, metrics: list[str], judge: JudgeOptions, **kw: object) -> Results:
    from dataclasses import replace

    offline = replace(judge, base_url=None, offline=True)
    return evaluate(str(records), metrics, judge=offline, bootstrap=50, **kw)  # type: ignore[arg-type]


def _assert_judged(results: Results, name: str, low: float, high: float) -> None:
    """Every record scored on the scale, or unscored with a reason."""
    for row in results.records:
        value = row.scores[name]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            assert row.errors[name], (row.id, name)
        else:
            assert low <= value <= high, (row.id, name, value)


def _assert_same(first: Results, replay: Results, section: str = "judge") -> None:
    assert replay.manifest[section]["requests"] == 0
    assert replay.manifest[section]["cache"]["misses"] == 0
    for a, b in zip(first.records, replay.records, strict=True):
        assert json.dumps(a.scores, sort_keys=True) == json.dumps(b.scores, sort_keys=True)
        assert a.errors == b.errors
    for name, item in first.summary.items():
        again = replay.summary[name]
        assert (item.value, item.n, item.ci95) == (again.value, again.n, again.ci95), name
        assert item.signature == again.signature, name


def test_rubrics_context_grades_and_pairwise_then_an_exact_replay(local_judge: object,
                                                                  tmp_path: Path) -> None:
    records = _write(tmp_path / "b.jsonl")
    other = _write(tmp_path / "a.jsonl", {"r1": "In 1998, in Oslo.", "r2": "It has 420."})
    judge = _judge(local_judge, tmp_path / "cache.sqlite", against=str(other))
    metrics = ["judge:faithfulness", "judge:pairwise", "ndcg@2", "p@2"]
    first = evaluate(str(records), metrics, judge=judge, judgments_from="judge", bootstrap=50)
    manifest = first.manifest["judge"]
    # llama-cpp-python's server refuses json_schema (HTTP 500 naming the response format;
    # llama.cpp's own llama-server takes it): one probe, then every request in its
    # json_object + schema form.
    assert set(manifest["response_format"]["refused"]) == {"json_schema"}
    assert "HTTP 500" in manifest["response_format"]["refused"]["json_schema"]
    assert manifest["response_format"]["used"] == {"json_object+schema": manifest["requests"]}
    assert manifest["requests"] == 2 + 4 + 4  # faithfulness, 2 x 2 contexts, 2 x 2 orders
    _assert_judged(first, "judge:faithfulness", 1, 5)
    _assert_judged(first, "judge:pairwise", 0, 1)
    for row in first.records:  # pairwise asked both orders
        orders = {v["order"] for v in row.details["judge:pairwise"]["verdicts"]}
        assert orders == {"this run as A", "this run as B"}
    # The judge's context grades became the judgments NDCG is scored with.
    judged = first.manifest["judged_judgments"]
    assert judged["records_graded"] + judged["records_incomplete"] == 2
    signature = first.summary["ndcg@2"].signature
    assert "judgments:judge/context_relevance@" in signature and local_judge.name in signature  # type: ignore[attr-defined]
    _assert_judged(first, "ndcg@2", 0, 1)
    for name in ("judge:faithfulness", "judge:pairwise"):
        sig = first.summary[name].signature
        assert f"|endpoint:{local_judge.base_url}|" in sig  # type: ignore[attr-defined]
        assert "|response_format:json_object+schema|" in sig

    replay = _replay(records, metrics, judge, judgments_from="judge")
    _assert_same(first, replay)


def test_samples_with_seeds(local_judge: object, tmp_path: Path) -> None:
    records = _write(tmp_path / "r.jsonl")
    judge = _judge(local_judge, tmp_path / "cache.sqlite", samples=2, temperature=0.8, seed=7)
    first = evaluate(str(records), ["judge:correctness"], judge=judge, bootstrap=50)
    assert first.manifest["judge"]["requests"] == 4
    _assert_judged(first, "judge:correctness", 1, 5)
    for row in first.records:
        detail = row.details["judge:correctness"]
        assert detail["samples_used"] == f"{len(detail['samples'])} of 2"
        assert all(1 <= v <= 5 for v in detail["samples"])
    _assert_same(first, _replay(records, ["judge:correctness"], judge))


def test_a_dry_run_counts_what_the_real_run_sends_and_its_prompt_tokens(
        local_judge: object, tmp_path: Path) -> None:
    """A dry run against the real server: the request count is the run's, and the prompt
    tokens (the server's own tokenizer, plus ChatML's framing) within 15% of the usage the
    server then reports; nothing is sent or written by the dry run."""
    from dataclasses import replace

    records = _write(tmp_path / "r.jsonl")
    judge = _judge(local_judge, tmp_path / "cache.sqlite")
    metrics = ["judge:faithfulness", "judge:correctness"]
    dry = evaluate(str(records), metrics, judge=replace(judge, dry_run=True), bootstrap=1)
    assert not (tmp_path / "cache.sqlite").exists()
    planned = dry.manifest["judge"]["dry_run"]
    assert dry.manifest["judge"]["prompt_tokens_counted_by"].startswith("the endpoint's")
    real = evaluate(str(records), metrics, judge=judge, bootstrap=1)
    section = real.manifest["judge"]
    assert section["requests"] == sum(p["requests"] for p in planned.values()) == 4
    estimate = sum(p["prompt_tokens"] for p in planned.values())
    assert abs(estimate - section["usage"]["prompt_tokens"]) <= 0.15 * estimate


def test_samples_at_a_temperature_report_stability_and_replay_exactly(
        local_judge: object, tmp_path: Path) -> None:
    """Three samples at temperature 0.7: the summary's stability figures and the
    judge-noise interval, reproduced by an offline replay with no request."""
    records = _write(tmp_path / "r.jsonl")
    judge = _judge(local_judge, tmp_path / "cache.sqlite", samples=3, temperature=0.7, seed=3)
    first = evaluate(str(records), ["judge:faithfulness"], judge=judge, bootstrap=50,
                     ci="judge-noise")
    item = first.summary["judge:faithfulness"]
    figures = item.figures["stability"]
    assert figures["samples"] == 3 and figures["items"] <= 2
    assert figures["items"] == 0 or 0 <= figures["flip_rate"] <= 1
    assert item.ci_method == "judge-noise"
    replay = _replay(records, ["judge:faithfulness"], judge, ci="judge-noise")
    _assert_same(first, replay)
    assert replay.summary["judge:faithfulness"].figures == item.figures
    assert replay.summary["judge:faithfulness"].ci95 == item.ci95


def test_a_two_member_panel_grades_then_replays_exactly(local_judge: object,
                                                       tmp_path: Path) -> None:
    """Two members, the real model at temperature 0.7 with two seeds: every record graded by
    both (or its abstention counted), the agreement reported, and an offline replay of the
    panel, member by member, with no request."""
    records = _write(tmp_path / "r.jsonl")
    judge = _judge(local_judge, tmp_path / "cache.sqlite", temperature=0.7,
                   panel=({"seed": 1}, {"seed": 2}))
    first = evaluate(str(records), ["judge:faithfulness"], judge=judge, bootstrap=50)
    assert first.manifest["judge_panel"]["requests"] == 4
    _assert_judged(first, "judge:faithfulness", 1, 5)
    names = [m["name"] for m in first.manifest["judge_panel"]["members"]]
    assert len(names) == 2
    for row in first.records:
        detail = row.details["judge:faithfulness"]
        assert set(detail["members"]) == set(names)
        assert set(detail["abstained"]) == {n for n, v in detail["members"].items() if v is None}
    panel = first.summary["judge:faithfulness"].figures["panel"]
    assert set(panel["members"]) == set(names) and panel["alpha_level"] == "interval"
    _assert_same(first, _replay(records, ["judge:faithfulness"], judge), "judge_panel")


def test_logprobs_give_an_expected_score(local_judge: object, tmp_path: Path) -> None:
    """llama-cpp-python returns top log-probabilities: the value is the expected score under
    the model's own distribution over the scale."""
    records = _write(tmp_path / "r.jsonl")
    judge = _judge(local_judge, tmp_path / "cache.sqlite", logprobs=True)
    first = evaluate(str(records), ["judge:correctness"], judge=judge, bootstrap=50)
    _assert_judged(first, "judge:correctness", 1, 5)
    for row in first.records:
        detail = row.details["judge:correctness"]
        if row.scores["judge:correctness"] is not None:
            distribution = detail["distribution"]
            assert set(distribution) <= {"1", "2", "3", "4", "5"}
            assert math.isclose(sum(distribution.values()), 1.0, rel_tol=1e-9)
            expected = sum(int(s) * p for s, p in distribution.items())
            assert math.isclose(row.scores["judge:correctness"], expected, rel_tol=1e-9)
    _assert_same(first, _replay(records, ["judge:correctness"], judge))


CLAIM_LEVEL = list(NAMES)


def test_claim_level_metrics_against_the_real_model_then_an_exact_replay(
        local_judge: object, tmp_path: Path) -> None:
    """Every claim-level step (extraction, checks, nugget creation, importance, assignment,
    citation checks) through llama.cpp: every value on 0-1 or unscored with the step's
    reason, the step prompts in the manifest, and an offline replay with no request."""
    # One record keeps the real model's share of the suite to a minute or so: every step
    # still runs (two claim extractions, checks against the reference, the answer and two
    # contexts, nugget creation, importance and assignment, the citation checks).
    record = dict(RECORDS[0], answer="It was founded in 1998 [1]. It is in Oslo [1][2].")
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps(record) + "\n", encoding="utf-8")
    judge = _judge(local_judge, tmp_path / "cache.sqlite", max_tokens=256)
    first = evaluate(str(records), CLAIM_LEVEL, judge=judge, bootstrap=50)
    manifest = first.manifest["claims"]
    assert manifest["requests"] > 0
    assert manifest["response_format"]["used"] == {"json_object+schema": manifest["requests"]
                                                   - manifest["failed"]}
    assert set(manifest["prompts"]) == {"extract_claims", "check_claims", "nuggets_create",
                                        "nuggets_importance", "nuggets_assign"}
    for name in CLAIM_LEVEL:
        _assert_judged(first, name, 0, 1)
    for row in first.records:
        assert {"claims", "nuggets", "citations"} <= set(row.details)
        statements = row.details["citations"]["statements"]
        assert statements is None or all(s["cites"] for s in statements)
    _assert_same(first, _replay(records, CLAIM_LEVEL, judge), section="claims")


def test_the_command_serves_until_interrupted() -> None:
    """`rageval local-judge --port 0` prints the flags to use once the model answers, and a
    Ctrl-C (SIGINT) stops the server cleanly."""
    need_local_extra()
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; from rageval.cli import main; sys.exit(main())",
         "local-judge", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in child.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("local judge ready"):
                break
        ready = lines[-1]
        assert "--judge-base-url http://127.0.0.1:" in ready
        assert "--judge-model smollm2-135m-instruct" in ready
        url = ready.split("--judge-base-url ")[1].split()[0]
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
        assert child.returncode == 0, err
        assert "local judge stopped" in out
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"{url}/models", timeout=2)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_real_server_killed_by_a_signal_is_reported_in_words(tmp_path: Path) -> None:
    """The real server, ready after a real completion, then killed with SIGILL (what a build
    for instructions the machine refuses meets): the judge run says so, with the rebuild
    command, instead of a connection error."""
    need_local_extra()
    from rageval.judge.llm.transport.client import JudgeError
    from rageval.judge.local import LocalJudge

    records = _write(tmp_path / "r.jsonl")
    with LocalJudge(port=0) as judge:
        assert judge.pid is not None
        os.kill(judge.pid, signal.SIGILL)
        deadline = time.monotonic() + 30
        while judge.exit_status() is None:
            assert time.monotonic() < deadline, "the server outlived SIGILL"
            time.sleep(0.05)
        options = _judge(judge, tmp_path / "cache.sqlite", max_retries=0)
        with pytest.raises(JudgeError) as info:
            evaluate(str(records), ["judge:faithfulness"], judge=options, bootstrap=10)
    message = str(info.value)
    assert f"the local judge on port {judge.port} was killed by SIGILL" in message
    assert "python -m rageval.judge.local.build --install --force" in message
