"""Evaluation files: reading and checking them, and `rageval run` with command-line overrides."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.cli import main
from rageval.config import read_eval_file
from rageval.config.schema import BY_PATH, FIELDS, INPUT_KINDS
from rageval.config.toml_lines import key_lines
from rageval.core.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "eval.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_schema_choices_match_the_code() -> None:
    from rageval.cli.parser import build_parser
    from rageval.cli.score_options import DEFAULTS
    from rageval.inputs.spec import INPUT_KINDS as READERS
    from rageval.judge.llm.transport.formats import MODES

    assert BY_PATH[("judge", "response_format")].choices == MODES  # the judge's own, declared
    assert INPUT_KINDS == READERS
    defaults = vars(build_parser().parse_args(["score"]))
    for spec in FIELDS:  # every field sets an option `rageval score` has
        if spec.dest not in ("optional_metrics", "description"):
            assert spec.dest in defaults, spec.dotted
    assert set(DEFAULTS) <= set(defaults)


def test_demo_file_reads(tmp_path: Path) -> None:
    loaded = read_eval_file(DEMO / "eval.toml")
    assert loaded.options["records"] == str(DEMO / "records.jsonl")
    assert loaded.options["cache"] == str(DEMO / "judge_cache.jsonl")
    assert loaded.options["out"] == "out/demo"  # relative to where rageval runs
    assert "ndcg(gain=exp)@3" in loaded.options["metrics"]
    assert "err(gmax=3)@3" in loaded.options["metrics"]
    assert loaded.options["optional_metrics"] == ["bertscore"]


def test_metric_tables_render_as_names(tmp_path: Path) -> None:
    path = write(tmp_path, 'metrics = [{name = "bertscore", idf = true, layer = 4}, '
                 '{name = "p", rel = 2, cutoff = 5}, "P@5"]\n')
    assert read_eval_file(path).options["metrics"] == [
        "bertscore(idf=true,layer=4)", "p(rel=2)@5", "P@5"]


@pytest.mark.parametrize(("text", "line", "field", "message"), [
    ('[judge]\nmodle = "x"\n', 2, "judge.modle", "did you mean 'model'"),
    ('[inptus]\nrecords = "r.jsonl"\n', 1, "inptus", "did you mean 'inputs'"),
    ('metrics = ["ndcg@3", 5]\n', 1, "metrics[1]", "a metric name or an inline table"),
    ('metrics = ["ndcg@"]\n', 1, "metrics[0]", "ndcg@"),
    ('metrics = [{cutoff = 3}]\n', 1, "metrics[0]", "needs name"),
    ('\n[judge]\nconcurrency = "8"\n', 3, "judge.concurrency", "expected an integer"),
    ('[judge]\noffline = 1\n', 2, "judge.offline", "expected true or false"),
    ('[judge]\nresponse_format = "yaml"\n', 2, "judge.response_format", "not one of"),
    ('[gate]\nfail_under = {"ndcg@3" = "high"}\n', 2, "gate.fail_under.ndcg@3",
     "expected a number"),
    ('[gate]\nfail_under = 0.4\n', 2, "gate.fail_under", "inline table"),
    ('judge = "x"\n', 1, "judge", "is a table"),
    ('[inputs]\nrecords = "a.jsonl"\nrun = "r.trec"\n', 3, "inputs.run", "not both"),
    ('[inputs]\nmap = {query = 3}\n', 2, "inputs.map.query", "column name"),
])
def test_errors_name_file_line_and_field(tmp_path: Path, text: str, line: int, field: str,
                                         message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as raised:
        read_eval_file(path)
    error = raised.value
    assert (error.path, error.line, error.field) == (str(path), line, field)
    assert message in error.message


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'metrics = ["ndcg@3"]\n[judge\nmodel = "x"\n')
    with pytest.raises(InputError, match="line 2"):
        read_eval_file(path)


def test_missing_file_is_an_input_error(tmp_path: Path, capsys) -> None:
    code, _, err = run(["run", str(tmp_path / "nope.toml")], capsys)
    assert code == 2 and "no such evaluation file" in err


_KEY = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_KEY, st.dictionaries(_KEY, st.integers(0, 9), min_size=1, max_size=4),
                       min_size=1, max_size=4),
       st.lists(st.integers(0, 2), min_size=8, max_size=8))
def test_key_lines_finds_every_key(tables: dict[str, dict[str, int]], blanks: list[int]) -> None:
    lines: list[str] = []
    expected: dict[tuple[str, ...], int] = {}
    for i, (table, keys) in enumerate(tables.items()):
        lines += [""] * blanks[i % len(blanks)] + [f"[{table}]"]
        expected[(table,)] = len(lines)
        for key, value in keys.items():
            lines.append(f"  {key} = {value}  # comment")
            expected[(table, key)] = len(lines)
    found = key_lines("\n".join(lines) + "\n")
    assert {k: found[k] for k in expected} == expected


def test_key_lines_reads_quoted_and_inline_keys() -> None:
    text = '[gate]\nfail_under = {"p(rel=2)@5" = 0.3, rouge1 = 0.2}\n"a.b" = 1\n'
    found = key_lines(text)
    assert found[("gate", "fail_under", "p(rel=2)@5")] == 2
    assert found[("gate", "fail_under", "rouge1")] == 2
    assert found[("gate", "a.b")] == 3


# --- rageval run -------------------------------------------------------------------------


def _small_file(tmp_path: Path, extra: str = "") -> Path:
    shutil.copy(DEMO / "records.jsonl", tmp_path / "records.jsonl")
    return write(tmp_path, 'metrics = ["ndcg@3", "mrr", "rouge1"]\n[inputs]\n'
                 f'records = "records.jsonl"\n[output]\ndir = "{tmp_path / "out"}"\n' + extra)


def test_run_equals_the_score_command(tmp_path: Path, capsys) -> None:
    path = _small_file(tmp_path)
    code, out, err = run(["run", str(path), "--no-progress"], capsys)
    assert code == 0, err
    assert "rageval summary (8 records)" in out
    from_file = json.loads((tmp_path / "out" / "summary.json").read_text())
    code, _, err = run(["score", str(tmp_path / "records.jsonl"), "-m", "ndcg@3", "-m", "mrr",
                        "-m", "rouge1", "--out", str(tmp_path / "direct"), "--no-progress"],
                       capsys)
    assert code == 0, err
    direct = json.loads((tmp_path / "direct" / "summary.json").read_text())
    assert from_file["metrics"] == direct["metrics"]
    entry = from_file["manifest"]["eval_file"]
    assert entry["path"] == str(path) and len(entry["sha256"]) == 64
    assert "eval_file" not in direct["manifest"]


def test_flags_override_fields(tmp_path: Path, capsys) -> None:
    path = _small_file(tmp_path, "[scoring]\nseed = 3\nbootstrap = 50\n")
    code, _, err = run(["run", str(path), "--out", str(tmp_path / "x"), "--seed", "7",
                        "-m", "map", "--no-progress"], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "x" / "summary.json").read_text())
    assert list(summary["metrics"]) == ["map"]  # -m replaces the file's list
    assert summary["manifest"]["bootstrap"] == {**summary["manifest"]["bootstrap"],
                                                "seed": 7, "resamples": 50}
    assert not (tmp_path / "out").exists()


def test_records_flag_replaces_the_files_inputs(tmp_path: Path, capsys) -> None:
    path = _small_file(tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text("".join(
        json.dumps({"id": f"x{i}", "contexts": ["a"], "judgments": {"1": 1},
                    "answer": "a b", "reference": "a c"}) + "\n" for i in range(3)))
    code, out, err = run(["run", str(path), "--records", str(other), "--no-progress"], capsys)
    assert code == 0, err
    assert "(3 records)" in out


def test_optional_metric_skipped_with_a_note(tmp_path: Path, capsys, monkeypatch) -> None:
    from rageval.cli import run_command
    from rageval.core.errors import MissingDependencyError

    def missing(name: str, options: object) -> None:
        raise MissingDependencyError("bert-score", "bertscore")

    monkeypatch.setattr("rageval.core.registry.create", missing)
    assert run_command._installed(["bertscore"]) == []
    assert "optional metric bertscore skipped" in capsys.readouterr().err


def test_records_flag_drops_what_went_with_the_files_source(tmp_path: Path, capsys) -> None:
    """A new records file is read by its own name, not by the file's format or run options."""
    shutil.copy(DEMO / "records.jsonl", tmp_path / "records.jsonl")
    path = write(tmp_path, 'metrics = ["mrr"]\n[inputs]\nrun = "run.trec"\ndepth = 10\n'
                 'format = "csv"\n')
    code, out, err = run(["run", str(path), "--records", str(tmp_path / "records.jsonl"),
                          "--no-progress"], capsys)
    assert code == 0, err
    assert "(8 records)" in out


def test_run_flag_keeps_the_beir_directory(tmp_path: Path, capsys) -> None:
    from trec_inputs import beir_dir, run_file

    beir = beir_dir(tmp_path / "beir")
    other = run_file(tmp_path)
    path = write(tmp_path, 'metrics = ["mrr"]\n[inputs]\nrun = "missing.trec"\nbeir = "beir"\n')
    code, _, err = run(["run", str(path), "--run", other, "--no-progress",
                        "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    manifest = json.loads((tmp_path / "o" / "summary.json").read_text())["manifest"]
    assert manifest["records"]["inputs"]["beir"] == str(beir)


def test_switches_and_the_gate_turn_off(tmp_path: Path, capsys) -> None:
    path = _small_file(tmp_path, '[gate]\nfail_under = {"mrr" = 0.99}\n')
    code, out, _ = run(["run", str(path), "--no-progress"], capsys)
    assert code == 3
    code, out, err = run(["run", str(path), "--no-progress", "--no-gate", "-m", "map"], capsys)
    assert code == 0, err
    assert "gate: " not in out
    demo = DEMO / "eval.toml"
    code, _, err = run(["run", str(demo), "-m", "mrr", "--no-progress"], capsys)
    assert code == 2 and "--no-gate skips it" in err


def test_offline_in_the_file_turns_off_on_the_command_line(tmp_path: Path, capsys,
                                                           monkeypatch) -> None:
    from rageval.cli import commands

    seen = {}

    def fake_run_score(args, out):  # the merged options, before any work
        seen.update(vars(args))
        return 0

    monkeypatch.setattr(commands, "run_score", fake_run_score)
    demo = DEMO / "eval.toml"
    assert run(["run", str(demo), "--no-progress"], capsys)[0] == 0
    assert seen["offline"] is True and seen["components"] is False
    assert run(["run", str(demo), "--no-offline", "--components"], capsys)[0] == 0
    assert seen["offline"] is False and seen["components"] is True
    assert seen["out"] == "out/demo" and seen["cache"] == str(DEMO / "judge_cache.jsonl")
