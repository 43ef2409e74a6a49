"""Where a run's reports go (--junit, --markdown, $GITHUB_STEP_SUMMARY): a path that cannot be
written is refused before scoring, and a job summary that cannot be appended to is a warning
that leaves the gate's exit status as it is."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from rageval.cli import main

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"
SCORE = ["score", str(DEMO), "-m", "ndcg@3", "--bootstrap", "20", "--no-progress"]


@pytest.mark.parametrize("flag", ["--junit", "--markdown"])
@pytest.mark.parametrize("where", ["a directory", "a missing parent"])
def test_an_unwritable_report_path_is_refused_before_scoring(
        flag: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path if where == "a directory" else tmp_path / "missing" / "report.xml"
    scored = []
    monkeypatch.setattr("rageval.cli.commands.evaluate",
                        lambda *args, **kwargs: scored.append(1))
    out = io.StringIO()
    code = main([*SCORE, flag, str(path), "--out", str(tmp_path / "run")], stdout=out)
    err = capsys.readouterr().err
    assert code == 2 and not scored, err
    assert f"{flag} {path}: cannot write there" in err
    assert ("is a directory" if where == "a directory" else "does not exist") in err
    assert not (tmp_path / "run").exists() and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("flag", ["--junit", "--markdown"])
def test_a_report_in_a_folder_the_run_makes_is_written(flag: str, tmp_path: Path) -> None:
    """``--out out/run --junit out/junit.xml``, as a CI job writes them: ``out`` does not
    exist yet, but the run makes it before the report is written."""
    report = tmp_path / "out" / "report.file"
    code = main([*SCORE, flag, str(report), "--out", str(tmp_path / "out" / "run")],
                stdout=io.StringIO())
    assert code == 0 and report.is_file()


def test_an_unwritable_step_summary_is_a_warning_and_the_gate_keeps_its_status(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "no-such-folder" / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = io.StringIO()
    assert main([*SCORE, "--fail-under", "ndcg@3=0.9"], stdout=out) == 3
    err = capsys.readouterr().err
    assert f"warning: $GITHUB_STEP_SUMMARY {summary}: cannot append" in err
    assert "::error title=rageval gate::" in out.getvalue()  # the annotations still come
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a directory
    assert main([*SCORE], stdout=io.StringIO()) == 0
    assert f"$GITHUB_STEP_SUMMARY {tmp_path}: cannot append" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--junit", "--markdown", "--otel-events"])
@pytest.mark.parametrize("name", ["summary.json", "records.jsonl", "conversations.jsonl"])
def test_a_report_at_one_of_the_runs_own_files_is_refused_before_scoring(
        flag: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out D --otel-events D/summary.json`` would overwrite the run's summary after it is
    written: refused before anything is scored, the run that was in D left as it was."""
    pytest.importorskip("opentelemetry.exporter.otlp.json.common")
    run_dir = tmp_path / "run"
    assert main([*SCORE, "--out", str(run_dir)], stdout=io.StringIO()) == 0
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    capsys.readouterr()
    out = io.StringIO()
    code = main([*SCORE, "--out", str(run_dir), flag, str(run_dir / name)], stdout=out)
    err = capsys.readouterr().err
    assert code == 2 and out.getvalue() == "", err
    assert (f"{flag} {run_dir / name}: that is the run's {name} in --out {run_dir}, which "
            "the run writes too") in err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_the_report_page_and_the_out_directory_are_the_runs_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    code = main([*SCORE, "--out", str(run_dir), "--report", "--markdown",
                 str(run_dir / "report.html")], stdout=io.StringIO())
    assert code == 2 and "that is the run's report.html" in capsys.readouterr().err
    code = main([*SCORE, "--out", str(run_dir), "--junit", str(run_dir)],
                stdout=io.StringIO())
    assert code == 2 and "that is the run's --out directory" in capsys.readouterr().err
    assert not run_dir.exists()


def test_two_reports_at_one_path_are_refused_before_scoring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths are compared resolved: ``./x`` and ``DIR/x`` through a link are one file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    out = io.StringIO()
    code = main([*SCORE, "--junit", "./real/report", "--markdown", "link/report"], stdout=out)
    err = capsys.readouterr().err
    assert code == 2 and out.getvalue() == ""
    assert ("--markdown link/report: that is the path of --junit, which the run writes "
            "too") in err
    assert not (tmp_path / "real" / "report").exists()
