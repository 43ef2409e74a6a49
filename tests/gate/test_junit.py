"""--junit FILE: the run and its gate as JUnit XML, read back by junitparser as CI systems read
it: a test case per gate check, a failure giving the value, the rule and the 95% CI, and an
error per metric with unscored records giving why."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from rageval.cli import main

junitparser = pytest.importorskip("junitparser")

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"
SCORE = ["score", str(DEMO), "-m", "ndcg@3", "-m", "rouge1", "--bootstrap", "50",
         "--no-progress"]


def _suite(path: Path) -> object:
    xml = junitparser.JUnitXml.fromfile(str(path))
    (suite,) = list(xml)
    return suite


def test_a_failed_check_and_unscored_records_are_reported(tmp_path: Path) -> None:
    out = io.StringIO()
    path = tmp_path / "reports" / "rageval.xml"
    path.parent.mkdir()
    argv = [*SCORE, "--fail-under", "ndcg@3=0.9", "--fail-under", "rouge1=0.3",
            "--junit", str(path)]
    assert main(argv, stdout=out) == 3  # the gate's status, as without --junit
    suite = _suite(path)
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (3, 1, 1, 0)
    cases = {case.name: case for case in suite}
    failed = cases["ndcg@3 >= 0.9 (mean)"]
    (failure,) = failed.result
    assert isinstance(failure, junitparser.Failure)
    assert failure.message.startswith("ndcg@3: mean 0.7984; rule >= 0.9 (mean); the value's "
                                      "95% CI [")
    assert cases["rouge1 >= 0.3 (mean)"].is_passed
    (error,) = cases["ndcg@3"].result
    assert isinstance(error, junitparser.Error)
    assert error.message == "ndcg@3: 1 record of 8 unscored"
    assert error.text == "1: undefined: no judged context with grade >= 1"
    assert suite.properties() is not None
    assert {p.name: p.value for p in suite.properties()}["records_count"] == "8"
    assert f"wrote {path} (JUnit XML)" in out.getvalue()


def test_without_a_gate_only_the_unscored_metrics_are_cases(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    assert main([*SCORE, "--junit", str(path)], stdout=io.StringIO()) == 0
    suite = _suite(path)
    assert (suite.tests, suite.failures, suite.errors) == (1, 0, 1)
    assert [case.name for case in suite] == ["ndcg@3"]


def test_a_file_that_cannot_be_written_is_refused_before_scoring(tmp_path: Path,
                                                                 capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main([*SCORE, "--junit", str(blocker / "r.xml")], stdout=io.StringIO()) == 2
    assert "--junit" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
