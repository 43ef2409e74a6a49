"""What the command line says when it refuses or fails: the failed gate of an export named,
an option the command does not take named once with its command, a near metric name offered,
and a run that writes its HTML report beside its files."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from rageval.cli import main

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "fixtures" / "demo" / "records.jsonl"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("telling") / "run"
    argv = ["score", str(RECORDS), "-m", "rouge1", "-m", "mrr", "--bootstrap", "20",
            "--out", str(out), "--no-progress"]
    assert main(argv, stdout=io.StringIO()) == 0
    return out


def test_export_with_a_failing_gate_says_which_checks_failed(
        run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "f.xml"
    status = main(["export", str(run_dir), "--format", "junit", "-o", str(target),
                   "--fail-under", "rouge1=0.99", "--fail-under", "mrr=0.1"],
                  stdout=io.StringIO())
    assert status == 3 and target.is_file()
    err = capsys.readouterr().err
    assert "gate failed (1 check)" in err and "rouge1" in err and "mrr" not in err


def test_an_option_a_command_does_not_take_is_named_once(
        run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["report", str(run_dir), "-o", str(tmp_path / "r.html"),
                   "--turn-threshold", "rouge1=0.5"], stdout=io.StringIO())
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rageval: error: report: unrecognized arguments: --turn-threshold")
    assert err.count("rageval:") == 1
    assert "when a run is scored" in err


def test_a_subcommand_error_names_the_command_not_rageval_twice(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report"], stdout=io.StringIO()) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rageval: error: report: ") and err.count("rageval") == 1


@pytest.mark.parametrize(("given", "offered"), [("rouge-l", "'rougeL'"),
                                                ("rouge-Lsum", "'rougeLsum'")])
def test_a_malformed_metric_name_gets_the_name_it_is_close_to(
        given: str, offered: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", str(RECORDS), "-m", given, "--no-progress"],
                stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "malformed metric name" in err and f"did you mean {offered}?" in err


def test_report_flag_writes_the_html_report_beside_the_run(tmp_path: Path) -> None:
    printed = io.StringIO()
    out = tmp_path / "run"
    assert main(["score", str(RECORDS), "-m", "rouge1", "--bootstrap", "20", "--out", str(out),
                 "--report", "--no-progress"], stdout=printed) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "rouge1" in page
    assert f"wrote {out / 'report.html'}" in printed.getvalue()


def test_report_flag_needs_an_output_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", str(RECORDS), "-m", "rouge1", "--report", "--no-progress"],
                stdout=io.StringIO()) == 2
    assert "--report writes DIR/report.html" in capsys.readouterr().err
