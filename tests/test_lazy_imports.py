"""A run imports only what its metrics need: lexical and retrieval metrics never load torch,
transformers, openai, nltk, the judge's client or the HTML report, nor the gate when no
threshold or baseline is given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rageval.core import registry
from rageval.core.names import parse

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"
HEAVY = ("torch", "transformers", "openai", "nltk", "bert_score", "rageval.report.html.page",
         "rageval.judge.llm.transport.client", "rageval.judge.rubric.metric",
         "rageval.generation.bertscore", "rageval.gate", "mlflow", "rageval.mlflow",
         "opentelemetry", "rageval.otel")


def _modules_after(code: str, cwd: Path) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True,
                          text=True, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_score_with_lexical_and_retrieval_metrics_imports_nothing_heavy(tmp_path: Path) -> None:
    code = (
        "from rageval.cli import main\n"
        f"code = main(['score', {str(DEMO)!r}, '-m', 'rouge1', '-m', 'bleu', '-m', 'ndcg@3',"
        f" '--out', {str(tmp_path / 'out')!r}, '--no-progress'])\n"
        "assert code == 0, code\n"
    )
    loaded = _modules_after(code, tmp_path)
    assert (tmp_path / "out" / "summary.json").exists()
    assert sorted(m for m in HEAVY if m in loaded) == []


def test_trec_eval_imports_no_judge_configuration(tmp_path: Path) -> None:
    """Masking the default API key's variable in its output does not load the judge's
    configuration (its options, endpoints, reply formats and cache keys)."""
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n")
    code = (
        "import contextlib, io\n"
        "from rageval.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main(['trec-eval', '-m', 'map', {str(qrels)!r}, {str(run)!r}])\n"
        "assert code == 0, code\n"
    )
    loaded = _modules_after(code, tmp_path)
    assert "rageval.retrieval.trec_eval.evaluation" in loaded
    assert sorted(m for m in loaded if m.startswith(("rageval.judge.llm.config",
                                                      "rageval.judge.llm.transport"))) == []


def test_a_judge_name_loads_the_judge_when_built(tmp_path: Path) -> None:
    code = ("from rageval.core.registry import create\n"
            "create('judge:faithfulness')\n")
    assert "rageval.judge.rubric.metric" in _modules_after(code, tmp_path)


def test_claim_kinds_match_the_claim_metrics() -> None:
    from rageval.judge.claims.metrics import KINDS
    from rageval.judge.registration import CLAIM_KINDS

    assert tuple(KINDS) == CLAIM_KINDS


@pytest.mark.parametrize("home", sorted({m for _, m in registry._HOMES} | {
    registry._RETRIEVAL_HOME}))
def test_each_builtin_name_is_registered_by_its_home_alone(home: str, tmp_path: Path) -> None:
    """The registry imports only a name's home module: that module alone must register it."""
    names = [name for name in registry.metric_classes() if registry._home(parse(name)) == home]
    assert names
    code = (f"import importlib; importlib.import_module({home!r})\n"
            "from rageval.core import registry\n"
            f"missing = [n for n in {names!r} if registry._lookup(n) is None]\n"
            "assert not missing, missing\n")
    _modules_after(code, tmp_path)


def test_unknown_names_still_get_hints_from_every_family() -> None:
    with pytest.raises(Exception, match=r"did you mean .rouge1."):
        registry.create("rogue1")


def _filled_cache(path: Path, rubric: str) -> None:
    """A judge cache holding a reply to every request of ``rubric`` on the demo records."""
    from rageval.core.metric import ScoreOptions
    from rageval.core.records import iter_windows
    from rageval.judge.llm.cache.store import JudgeCache
    from rageval.judge.llm.options import JudgeOptions

    judge = JudgeOptions(model="m", cache=str(path), offline=True)
    metric: Any = registry.create(f"judge:{rubric}", ScoreOptions(judge=judge))
    reply = json.dumps({"reasoning": "It follows the contexts.", "score": 4})
    with JudgeCache(path) as cache:
        for i, record in enumerate(next(iter_windows(str(DEMO), 10_000))):
            cache.put_many([(unit.keys["json_schema"], {"model": "m"}, reply,
                             {"total_tokens": 1}, {"record": record.id}, unit.request_id)
                            for unit in metric.units(record, i)])


def test_an_offline_judge_replay_imports_no_client_and_no_network_stack(tmp_path: Path) -> None:
    """A replay reads the cache: no HTTP client, no SDK, no tokenizer requests, no pairwise
    judge it was not asked for."""
    cache = tmp_path / "judge.sqlite"
    _filled_cache(cache, "faithfulness")
    code = (
        "from rageval.cli import main\n"
        f"code = main(['score', {str(DEMO)!r}, '-m', 'judge:faithfulness', '--judge-model', 'm',"
        f" '--cache', {str(cache)!r}, '--offline', '--out', {str(tmp_path / 'out')!r},"
        " '--no-progress'])\n"
        "assert code == 0, code\n"
    )
    loaded = _modules_after(code, tmp_path)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["manifest"]["judge"]["cache"]["hits"] > 0
    assert sorted(m for m in ("openai", "httpx", "urllib.request", "http.client", "ssl",
                              "rageval.judge.llm.transport.client",
                              "rageval.judge.pairwise.metric") if m in loaded) == []

