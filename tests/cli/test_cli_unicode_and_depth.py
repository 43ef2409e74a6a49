"""Lone surrogates and JSON nested too deeply are inputs, not crashes: an id that is not valid
Unicode is refused, text rageval writes has each lone surrogate replaced with U+FFFD (the
record's details say where), deep JSON is an error naming the file, line and field."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_server import JudgeServer

from rageval.cli import main

METRIC = "judge:faithfulness"
DEEP = "[" * 3000 + "]" * 3000


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main([*argv, "--no-progress"], stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def record(rid: str = "q1", **more: object) -> str:
    item = {"id": rid, "query": "Who wrote it?", "answer": "Ann wrote it.",
            "contexts": [{"id": "d1", "text": "Ann wrote the book."}], "reference": "Ann.",
            **more}
    return json.dumps(item)


# ---- ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["id", "contexts[0].id"])
def test_an_id_holding_a_lone_surrogate_is_refused(tmp_path: Path, capsys, field: str) -> None:
    line = record().replace('"q1"' if field == "id" else '"d1"', '"q\\ud800"')
    path = write(tmp_path / "r.jsonl", [record("q0"), line])
    code, _, err = run(["score", str(path), "-m", "rouge1"], capsys)
    assert code == 2, err
    assert f"{path}, line 2, field '{field}'" in err
    assert "not valid Unicode" in err and "Traceback" not in err


# ---- judge replies -------------------------------------------------------------------------


def judged(tmp_path: Path, capsys, server: JudgeServer | None, *more: str) -> tuple[int, str]:
    records = write(tmp_path / "r.jsonl", [record("q1"), record("q2")])
    argv = ["score", str(records), "-m", METRIC, "--judge-model", "judge-model",
            "--judge-base-url", server.base_url if server else "http://127.0.0.1:9/v1",
            "--cache", str(tmp_path / "cache.sqlite"), "--out", str(tmp_path / "out"),
            "--bootstrap", "10", *more]
    code, _, err = run(argv, capsys)
    return code, err


def lines(tmp_path: Path) -> dict[str, dict]:
    raw = (tmp_path / "out" / "records.jsonl").read_bytes()
    return {row["id"]: row for row in map(json.loads, raw.decode("utf-8").splitlines())}


@pytest.mark.parametrize("fault", ["surrogate", "surrogate_raw"])
def test_a_reply_holding_a_lone_surrogate_is_written_repaired_and_replays(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with JudgeServer() as server:
        server.always = fault
        code, err = judged(tmp_path, capsys, server)
    assert code == 0, err
    rows = lines(tmp_path)
    detail = rows["q1"]["details"][METRIC]
    assert "\ufffd" in json.dumps(detail, ensure_ascii=False)
    assert rows["q1"]["scores"][METRIC] is not None
    assert any(path.startswith(f"details.{METRIC}")
               for path in rows["q1"]["details"]["lone_surrogates"])
    # The cached replies replay offline, to the same scores and the same repaired text.
    code, err = judged(tmp_path, capsys, None, "--offline")
    assert code == 0, err
    assert {rid: said(row) for rid, row in lines(tmp_path).items()} == {
        rid: said(row) for rid, row in rows.items()}


def said(row: dict) -> tuple:
    return (row["scores"], row["details"][METRIC]["reasoning"],
            row["details"].get("lone_surrogates"))


def test_a_poisoned_cache_export_imports_and_replays(tmp_path: Path, capsys,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with JudgeServer() as server:
        code, err = judged(tmp_path, capsys, server)
    assert code == 0, err
    exported = tmp_path / "cache.jsonl"
    assert main(["cache", "export", str(exported), "--cache", str(tmp_path / "cache.sqlite")]) == 0
    # Each reply's reasoning given a lone surrogate, as a JSON escape in the export's line.
    poisoned = [line.replace('Scripted verdict', 'ok \\\\ud800 \\ud800')
                for line in exported.read_text(encoding="utf-8").splitlines()]
    assert all("\\ud800" in line for line in poisoned)
    write(exported, poisoned)
    (tmp_path / "cache.sqlite").unlink()
    assert main(["cache", "import", str(exported), "--cache",
                 str(tmp_path / "cache.sqlite")]) == 0, capsys.readouterr().err
    code, err = judged(tmp_path, capsys, None, "--offline")
    assert code == 0, err
    for row in lines(tmp_path).values():
        assert row["details"][METRIC]["reasoning"].startswith("ok \ufffd \ufffd")
        assert row["details"]["lone_surrogates"] == [f"details.{METRIC}.reasoning"]
