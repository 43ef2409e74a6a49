"""What the commands say matches what they do: usage lines name every option, counts agree
with their nouns, the report is suggested only with what it needs, a replaced run is said,
and the run's one-line account reaches a log as well as a terminal."""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path

import pytest

from rageval.cli import main
from rageval.cli import trec_eval_command as command
from rageval.core.results import count_of

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"


def test_the_trec_eval_usage_names_every_option() -> None:
    letters = re.findall(r"([A-Za-z]):?", "hvqm:cl:nD:JN:M:R:T:oZ:")
    assert command.USAGE.count("usage:") == 1
    for letter in letters:
        assert f"[-{letter}" in command.USAGE, letter
        assert f"\n  -{letter}" in command.HELP, letter


def test_counts_agree_with_their_nouns() -> None:
    assert count_of(1, "record") == "1 record"
    assert count_of(0, "record") == "0 records"
    assert count_of(1234, "record") == "1,234 records"


def _one_record(tmp_path: Path) -> Path:
    path = tmp_path / "one.jsonl"
    path.write_text(DEMO.read_text().splitlines()[0] + "\n")
    return path


def test_a_run_of_one_record_says_one_record(tmp_path: Path, capsys) -> None:
    out = io.StringIO()
    assert main(["score", str(_one_record(tmp_path)), "-m", "p@3", "--bootstrap", "10"],
                stdout=out) == 0
    assert "(1 record)" in out.getvalue()
    assert "1 records" not in out.getvalue() + capsys.readouterr().err


def test_the_account_line_reaches_a_log_unless_turned_off(tmp_path: Path, capsys) -> None:
    args = ["score", str(_one_record(tmp_path)), "-m", "p@3", "--bootstrap", "10"]
    assert main(args, stdout=io.StringIO()) == 0  # stderr is not a terminal here
    assert re.search(r"^1 record · 1 metric · [0-9.]+ s$", capsys.readouterr().err, re.M)
    assert main([*args, "--no-progress"], stdout=io.StringIO()) == 0
    assert "1 metric" not in capsys.readouterr().err


def test_a_replaced_run_is_said(tmp_path: Path) -> None:
    args = ["score", str(DEMO), "-m", "p@3", "--bootstrap", "10", "--no-progress",
            "--out", str(tmp_path / "run")]
    first, second = io.StringIO(), io.StringIO()
    assert main(args, stdout=first) == 0
    assert main(args, stdout=second) == 0
    assert "replacing the run that was there" not in first.getvalue()
    assert "replacing the run that was there" in " ".join(second.getvalue().split())


def test_the_report_is_suggested_with_what_it_needs(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["score", str(DEMO), "-m", "p@3", "--bootstrap", "10", "--no-progress",
            "--out", str(tmp_path / "run")]
    real = importlib.util.find_spec

    def without_matplotlib(name: str, *rest: object) -> object:
        return None if name == "matplotlib" else real(name, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_matplotlib)
    out = io.StringIO()
    assert main(args, stdout=out) == 0
    said = " ".join(out.getvalue().split())
    assert "HTML report: pip install 'rageval[report]', then rageval report" in said
    monkeypatch.setattr(importlib.util, "find_spec", real)
    out = io.StringIO()
    assert main(args, stdout=out) == 0
    if real("matplotlib") is not None:
        assert "HTML report: rageval report" in " ".join(out.getvalue().split())
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["metrics"]


def test_the_cache_help_names_both_kinds(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["score", "--help"], stdout=io.StringIO())
    text = " ".join(capsys.readouterr().out.split())
    assert "a SQLite file (default .rageval/cache.sqlite), or a JSONL export" in text
