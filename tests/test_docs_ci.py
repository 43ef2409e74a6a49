"""The GitHub Actions workflow of docs/ci.md (docs/ci/rageval-gate.yml): it parses, its steps
are the ones the page describes, and its rageval commands run on the demo data as written: the
first without a baseline, the second against the first's run; the JUnit and Markdown files they
write read back."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from rageval.cli import main

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "ci" / "rageval-gate.yml"


def _workflow() -> dict[str, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as True.
    loaded["on"] = loaded.pop(True, loaded.get("on"))
    return loaded


def _steps() -> list[dict[str, Any]]:
    (job,) = _workflow()["jobs"].values()
    steps: list[dict[str, Any]] = job["steps"]
    return steps


def _rageval_commands() -> list[list[str]]:
    return [shlex.split(line)[1:] for step in _steps() for line in step.get("run", "").splitlines()
            if line.strip().startswith("rageval ")]


def test_the_workflow_runs_on_pull_requests_and_main_with_the_steps_described() -> None:
    workflow = _workflow()
    assert set(workflow["on"]) == {"pull_request", "push"}
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert workflow["permissions"] == {"contents": "read", "actions": "read",
                                       "pull-requests": "write"}
    uses = [step.get("uses", "").split("@")[0] for step in _steps()]
    assert uses[:2] == ["actions/checkout", "actions/setup-python"]
    assert "actions/upload-artifact" in uses and "dawidd6/action-download-artifact" in uses
    runs = " ".join(step.get("run", "") for step in _steps())
    assert "pip install ." in runs and "gh pr comment" in runs
    upload = next(s for s in _steps() if s.get("uses", "").startswith("actions/upload"))
    download = next(s for s in _steps() if s.get("uses", "").startswith("dawidd6/"))
    assert upload["with"]["name"] == download["with"]["name"]  # the baseline is the kept run
    assert download["with"]["path"] == "out/baseline"
    comment = next(s for s in _steps() if "gh pr comment" in s.get("run", ""))
    assert comment["continue-on-error"] is True  # a comment never decides the job


def test_its_rageval_commands_run_on_the_demo_data(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _rageval_commands()
    assert "--baseline" not in first and second[second.index("--baseline") + 1] == "out/baseline"
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    monkeypatch.chdir(tmp_path)
    assert main(first) == 0
    from junitparser import Failure, JUnitXml

    (suite,) = JUnitXml.fromfile("out/rageval-junit.xml")
    checks = [case for case in suite if case.classname.startswith("rageval.gate")]
    assert checks and not any(isinstance(r, Failure) for case in checks for r in case.result)
    assert "| metric |" in Path("out/rageval-summary.md").read_text(encoding="utf-8")
    shutil.copytree("out/run", "out/baseline")  # what the artifact step keeps for the next run
    assert main(second) == 0
    table = Path("out/rageval-summary.md").read_text(encoding="utf-8")
    assert "baseline" in table and "delta" in table
