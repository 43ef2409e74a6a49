"""rageval export: a saved run as Markdown, CSV, JUnit XML or JSON, with the gate's checks
when gate options are given, without scoring again."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from rageval.cli import main

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    argv = ["score", str(DEMO), "-m", "ndcg@3", "-m", "rouge1", "--bootstrap", "50",
            "--no-progress", "--out", str(out)]
    assert main(argv, stdout=io.StringIO()) == 0
    return out


def _export(run: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(["export", str(run), *args], stdout=out)
    return status, out.getvalue()


def test_each_format_holds_the_run(run: Path) -> None:
    saved = json.loads((run / "summary.json").read_text())
    status, text = _export(run, "--format", "json")
    exported = json.loads(text)
    assert status == 0
    assert (exported["metrics"], exported["manifest"]) == (saved["metrics"], saved["manifest"])
    status, text = _export(run, "--format", "csv")
    rows = {row["metric"]: row for row in csv.DictReader(io.StringIO(text))}
    assert status == 0 and float(rows["rouge1"]["value"]) == saved["metrics"]["rouge1"]["value"]
    status, text = _export(run, "--format", "md")
    assert status == 0 and text.startswith(f"### rageval: {run} (8 records)\n")
    assert "| `rouge1` | 0.571 | 0–1 | [0.5004, 0.6446] | — | — | — | — |" in text


def test_a_gate_given_is_checked_and_sets_the_exit_status(run: Path, tmp_path: Path) -> None:
    junitparser = pytest.importorskip("junitparser")
    path = tmp_path / "junit.xml"
    status, _ = _export(run, "--format", "junit", "-o", str(path),
                        "--fail-under", "rouge1=0.6", "--fail-under", "ndcg@3=0.5")
    assert status == 3
    (suite,) = list(junitparser.JUnitXml.fromfile(str(path)))
    assert (suite.tests, suite.failures, suite.errors) == (3, 1, 1)
    status, text = _export(run, "--format", "json", "--fail-under", "rouge1=0.5",
                           "--baseline", str(run))
    gate = json.loads(text)["gate"]
    assert status == 0 and gate["passed"] is True
    regression = next(c for c in gate["checks"] if c["check"] == "regression"
                      and c["metric"] == "rouge1")
    assert (regression["delta"], regression["p_value"]) == (0.0, 1.0)


def test_a_threshold_on_an_unknown_metric_is_a_usage_error(run: Path, capsys) -> None:
    status, _ = _export(run, "--format", "md", "--fail-under", "rogue1=0.5")
    assert status == 2
    assert "rouge1" in capsys.readouterr().err  # the close match is named


def test_the_failed_checks_named_on_stderr_are_made_safe(run: Path, capsys) -> None:
    """A run directory may come from elsewhere (a build's artifact): a metric name in its
    files holding a line break and a workflow command is shown escaped, never as a line of
    its own."""
    import hashlib

    name = "rouge1\n::error::injected \x1b[2J"
    lines = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    for line in lines:
        line["scores"][name] = line["scores"].pop("rouge1")
    records = "".join(json.dumps(line) + "\n" for line in lines)
    (run / "records.jsonl").write_text(records)
    summary = json.loads((run / "summary.json").read_text())
    summary["metrics"][name] = summary["metrics"].pop("rouge1")
    summary["records_sha256"] = hashlib.sha256(records.encode()).hexdigest()
    (run / "summary.json").write_text(json.dumps(summary))
    capsys.readouterr()
    status, _ = _export(run, "--format", "md", "--fail-under", f"{name}=0.99")
    err = capsys.readouterr().err
    assert status == 3 and "rageval: gate failed (1 check): rouge1\\n" in err
    assert "\x1b" not in err
    assert not any(line.lstrip().startswith("::") for line in err.splitlines())
