"""The README's first command (the demo) runs as written, offline."""

from __future__ import annotations

import io
import json
import re
import shlex
import sys
from pathlib import Path

from rageval.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)


def test_readme_opens_with_demo_and_test_commands() -> None:
    demo, tests = _readme_commands()[:2]
    assert demo.startswith("pip install . && rageval score fixtures/demo/")
    assert "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci  # CI runs the README's test command verbatim


def test_readme_demo_command_runs(tmp_path: Path, monkeypatch) -> None:
    demo = _readme_commands()[0]
    argv = shlex.split(demo.split("&&", 1)[1])
    assert argv[0] == "rageval"
    monkeypatch.chdir(ROOT)
    out_index = argv.index("--out")
    argv[out_index + 1] = str(tmp_path / "demo")
    out = io.StringIO()
    assert main([*argv[1:], "--no-progress"], stdout=out) == 0
    assert "rageval summary" in out.getvalue()
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert "ndcg@3" in summary["metrics"] and "bleu" in summary["metrics"]
    # The judge criteria are replayed from the shipped cache: all scored, nothing asked.
    judge = summary["manifest"]["judge"]
    assert judge["offline"] is True and judge["requests"] == 0 and judge["cache"]["misses"] == 0
    for name in ("judge:faithfulness", "judge:correctness", "judge:context_relevance"):
        assert summary["metrics"][name]["unscored"] == 0
    assert sorted(p.name for p in (ROOT / "fixtures" / "demo").iterdir()) == [
        "judge_cache.jsonl", "records.jsonl"]  # the replay wrote nothing beside its cache


def test_demo_judge_cache_is_what_the_script_builds() -> None:
    """The README says the demo cache comes from the scripted judge server: rebuild it."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import make_demo_judge_cache as maker
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert maker.FIXTURE.read_text(encoding="utf-8") == maker.build()
