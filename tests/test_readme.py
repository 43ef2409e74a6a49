"""The README's first command (the demo) runs as written, offline."""

from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path

from rageval.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)


def test_readme_opens_with_demo_and_test_commands() -> None:
    demo, tests = _readme_commands()[:2]
    assert demo == ("pip install . && rageval run fixtures/demo/eval.toml && "
                    "rageval run fixtures/demo/conversations.toml")
    assert "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci  # CI runs the README's test command verbatim


def _demo_runs() -> list[list[str]]:
    """The README demo's rageval commands (after the install), as argument lists."""
    argvs = [shlex.split(part) for part in _readme_commands()[0].split("&&")[1:]]
    assert all(argv[:2] == ["rageval", "run"] for argv in argvs)
    return argvs


def test_readme_demo_command_runs(tmp_path: Path, monkeypatch) -> None:
    argv = _demo_runs()[0]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    assert main([*argv[1:], "--out", str(tmp_path / "demo"), "--no-progress"], stdout=out) == 0
    assert "rageval summary" in out.getvalue()
    # The first command writes the HTML report too: a plain install can, and the file asks.
    assert (tmp_path / "demo" / "report.html").read_text().startswith("<!DOCTYPE html>")
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert "ndcg@3" in summary["metrics"] and "bleu" in summary["metrics"]
    # BERTScore is optional in the file; the test extra installs it, so it is scored here.
    assert summary["metrics"]["bertscore"]["n"] == 8
    # The judge criteria are replayed from the shipped cache: all scored, nothing asked.
    judge = summary["manifest"]["judge"]
    assert judge["offline"] is True and judge["requests"] == 0 and judge["cache"]["misses"] == 0
    for name in ("judge:faithfulness", "judge:correctness", "judge:context_relevance"):
        assert summary["metrics"][name]["unscored"] == 0
    # So are the claim-level metrics' steps.
    claims = summary["manifest"]["claims"]
    assert claims["offline"] is True and claims["requests"] == 0 and claims["cache"]["misses"] == 0
    for name in ("claims:f1", "claims:claim_recall", "claims:faithfulness",
                 "nuggets:vital_strict", "citations:recall", "citations:precision"):
        assert summary["metrics"][name]["n"] > 0
        assert "|judge:smollm2-135m-instruct|" in summary["metrics"][name]["signature"]
    assert sorted(p.name for p in (ROOT / "fixtures" / "demo").iterdir()) == DEMO_FILES


# What fixtures/demo holds: a replay writes nothing beside.
DEMO_FILES = ["conversations.jsonl", "conversations.toml", "conversations_cache.jsonl",
              "eval.toml", "judge_cache.jsonl", "records.jsonl"]


def test_readme_conversation_demo_runs(tmp_path: Path, monkeypatch) -> None:
    argv = _demo_runs()[1]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    run = tmp_path / "conversations"
    assert main([*argv[1:], "--out", str(run), "--no-progress"], stdout=out) == 0
    assert "3 conversations of 7 turns" in out.getvalue()
    summary = json.loads((run / "summary.json").read_text())
    judge = summary["manifest"]["judge"]
    assert judge["offline"] is True and judge["requests"] == 0 and judge["cache"]["misses"] == 0
    for name in ("judge:answer_relevance", "judge:faithfulness", "judge:resolution",
                 "judge:consistency", "ndcg@3", "rouge1", "tools:f1"):
        item = summary["metrics"][name]
        assert item["ci_method"] == "conversations" and "|unit:conversation|" in item["signature"]
    assert summary["metrics"]["judge:resolution"]["n"] == 3
    rows = [json.loads(x) for x in (run / "conversations.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["conv-revenue", "conv-cash", "conv-europe"]
    assert all(set(r["conversation_scores"]) == {"judge:resolution", "judge:consistency"}
               for r in rows)
    assert all("first_failing" in r["scores"]["rouge1"] for r in rows)
    assert sorted(p.name for p in (ROOT / "fixtures" / "demo").iterdir()) == DEMO_FILES


def test_demo_judge_cache_comes_from_the_local_model(tmp_path: Path) -> None:
    """The README says the demo cache was written by SmolLM2 through the local judge
    (scripts/make_demo_judge_cache.py): every reply says so, the replay reproduces the scores
    the replies hold, and at least 95% of the judgments are scored."""
    from rageval.api import evaluate
    from rageval.judge.llm.options import JudgeOptions
    from rageval.judge.local import DEFAULT_MODEL_NAME
    from rageval.judge.rubric.parsing import parse_reply
    from rageval.judge.rubric.rubrics import load_rubric

    cache = ROOT / "fixtures" / "demo" / "judge_cache.jsonl"
    everything = [json.loads(line) for line in cache.read_text(encoding="utf-8").splitlines()]
    for entry in everything:
        assert entry["model"] == entry["meta"]["served_model"] == DEFAULT_MODEL_NAME
        assert entry["meta"]["format"] == "json_object+schema"
        assert entry["request"]["endpoint"] == "http://127.0.0.1:8011/v1"
    # The rubric judge's replies (the claim-level steps' are checked below).
    entries = [entry for entry in everything if "rubric" in entry["meta"]]
    assert entries
    parsed = [parse_reply(e["reply"], load_rubric(e["meta"]["rubric"])) for e in entries]
    assert sum(p.ok for p in parsed) >= 0.95 * len(entries)
    criteria = ["judge:faithfulness", "judge:correctness", "judge:context_relevance"]
    judge = JudgeOptions(model=DEFAULT_MODEL_NAME, cache=str(cache), offline=True)
    results = evaluate(str(ROOT / "fixtures" / "demo" / "records.jsonl"), criteria,
                       judge=judge, bootstrap=1)
    by_record = {(e["meta"]["record"], e["meta"]["rubric"], e["meta"].get("context")): p.score
                 for e, p in zip(entries, parsed, strict=True)}
    for row in results.records:
        for name in ("faithfulness", "correctness"):
            assert row.scores[f"judge:{name}"] == by_record[(row.id, name, None)]
        grades = row.details["judge:context_relevance"]["contexts"]
        assert [g["grade"] for g in grades] == [
            by_record[(row.id, "context_relevance", g["id"])] for g in grades]
    for name in criteria:
        signature = results.summary[name].signature
        assert f"|judge:{DEFAULT_MODEL_NAME}|endpoint:http://127.0.0.1:8011/v1|" in signature
        assert "|response_format:json_object+schema|" in signature


def test_demo_claim_level_replay_matches_the_cached_steps() -> None:
    """Every step of the claim-level metrics on the demo is in the shipped cache (written by
    the same local model), the replay asks nothing, and every value is the formula applied to
    the details the replay wrote."""
    from rageval.api import evaluate
    from rageval.judge.claims.citation_scores import citation_score
    from rageval.judge.claims.claim_scores import CLAIM_METRICS, claim_score
    from rageval.judge.claims.nugget_scores import NUGGET_METRICS, nugget_score
    from rageval.judge.llm.options import JudgeOptions
    from rageval.judge.local import DEFAULT_MODEL_NAME

    cache = ROOT / "fixtures" / "demo" / "judge_cache.jsonl"
    steps = {json.loads(line)["meta"].get("step")
             for line in cache.read_text(encoding="utf-8").splitlines()}
    assert {"extract_claims", "check_claims", "nuggets_create", "nuggets_importance",
            "nuggets_assign"} <= steps
    metrics = ([f"claims:{m}" for m in CLAIM_METRICS] + [f"nuggets:{m}" for m in NUGGET_METRICS]
               + ["citations:recall", "citations:precision"])
    judge = JudgeOptions(model=DEFAULT_MODEL_NAME, cache=str(cache), offline=True)
    results = evaluate(str(ROOT / "fixtures" / "demo" / "records.jsonl"), metrics, judge=judge,
                       bootstrap=1)
    assert results.manifest["claims"]["requests"] == 0
    assert results.manifest["claims"]["cache"]["misses"] == 0
    formulas = {"claims": claim_score, "nuggets": nugget_score, "citations": citation_score}
    for row in results.records:
        for name in metrics:
            kind, target = name.split(":")
            value, _ = formulas[kind](row.details[kind], target)
            stored = row.scores[name]
            assert (stored is None and value != value) or stored == value, (row.id, name)
    assert sum(results.summary[name].n for name in metrics) >= 0.8 * len(metrics) * 8


def test_conversation_demo_cache_comes_from_the_local_model() -> None:
    """The conversation demo's replies were written by SmolLM2 through the local judge
    (scripts/make_demo_judge_cache.py --set conversations), and the replay reproduces each
    whole-conversation score its reply holds."""
    from rageval.api import evaluate
    from rageval.judge.llm.options import JudgeOptions
    from rageval.judge.local import DEFAULT_MODEL_NAME
    from rageval.judge.rubric.parsing import parse_reply
    from rageval.judge.rubric.rubrics import load_rubric

    cache = ROOT / "fixtures" / "demo" / "conversations_cache.jsonl"
    entries = [json.loads(line) for line in cache.read_text(encoding="utf-8").splitlines()]
    assert len(entries) == 22  # 8 turns and records x 2 rubrics, 3 conversations x 2
    for entry in entries:
        assert entry["model"] == entry["meta"]["served_model"] == DEFAULT_MODEL_NAME
        assert entry["meta"]["format"] == "json_object+schema"
    whole = {(e["meta"]["record"], e["meta"]["rubric"]):
             parse_reply(e["reply"], load_rubric(e["meta"]["rubric"])).score
             for e in entries if e["meta"]["rubric"] in ("resolution", "consistency")}
    assert len(whole) == 6
    judge = JudgeOptions(model=DEFAULT_MODEL_NAME, cache=str(cache), offline=True)
    results = evaluate(str(ROOT / "fixtures" / "demo" / "conversations.jsonl"),
                       ["judge:resolution", "judge:consistency"], judge=judge, bootstrap=1)
    for row in results.conversations():
        for name in ("resolution", "consistency"):
            assert row["conversation_scores"][f"judge:{name}"] == whole[(row["id"], name)]
