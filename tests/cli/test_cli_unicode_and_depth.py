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


# ---- JSON nested too deeply ----------------------------------------------------------------


def tool_record(arguments: object, **more: object) -> str:
    return record(tool_calls=[{"name": "search", "arguments": arguments}],
                  reference_tool_calls=[{"name": "search"}], **more)


@pytest.mark.parametrize(("line", "field"), [
    (tool_record('{"q": ' + DEEP + "}"), "tool_calls[0].arguments"),
    (tool_record({"q": json.loads("[" * 900 + "]" * 900)}), "tool_calls[0].arguments"),
    (json.dumps({"id": "c1", "turns": [json.loads(tool_record("{}", id="t1")), json.loads(
        tool_record({"q": json.loads("[" * 500 + "]" * 500)}, id="t2"))]}),
     "turns[1].tool_calls[0].arguments"),
    (record(tool_calls=[{"name": "search", "arguments": {},
                         "result": {"hits": json.loads("[" * 300 + "]" * 300)}}],
            reference_tool_calls=[{"name": "search"}]), "tool_calls[0].result"),
])
def test_deep_tool_call_arguments_name_the_file_line_and_field(
        tmp_path: Path, capsys, line: str, field: str) -> None:
    path = write(tmp_path / "r.jsonl", [record("q0"), line])
    code, _, err = run(["score", str(path), "-m", "tools:f1"], capsys)
    assert code == 2, err
    assert f"{path}, line 2, field '{field}'" in err
    assert "nested" in err and "Traceback" not in err


def test_a_line_nested_past_the_parser_names_its_line(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "r.jsonl", [record("q0"), '{"id": "q1", "x": ' + DEEP + "}"])
    code, _, err = run(["score", str(path), "-m", "rouge1"], capsys)
    assert code == 2 and f"{path}, line 2: JSON nested too deeply" in err, err


def otlp(path: Path, attributes: dict[str, str]) -> Path:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "rag",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "CHAIN"}},
                           {"key": "input.value", "value": {"stringValue": "Who?"}},
                           *({"key": k, "value": {"stringValue": v}}
                             for k, v in attributes.items())]}
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n")
    return path


@pytest.mark.parametrize(("metadata", "says"), [
    ('{"qid": ' + DEEP + "}", "JSON nested too deeply"),
    ('{"qid": "q\\ud800"}', "not valid Unicode"),
])
def test_a_trace_attribute_read_as_the_id_names_the_trace_and_field(
        tmp_path: Path, capsys, metadata: str, says: str) -> None:
    path = otlp(tmp_path / "spans.jsonl", {"metadata": metadata})
    code, _, err = run(["score", str(path), "--input-format", "openinference",
                        "--map", "id=metadata.qid", "-m", "rouge1"], capsys)
    assert code == 2, err
    assert f"{path}, line 1" in err and "field 'id'" in err and says in err
    assert "Traceback" not in err


# ---- integers past the machine's -----------------------------------------------------------


@pytest.mark.parametrize(("option", "says"), [
    ("--max-line-bytes", "max_line_bytes (--max-line-bytes) must be an integer from 1 to"),
    ("--bootstrap", "bootstrap must be an integer from 1 to 10,000,000"),
    ("--window", "the window size must be an integer from 1 to"),
    ("--batch-size", "batch_size must be an integer from 1 to"),
    ("--judge-samples", "judge samples must be an integer from 1 to 1,000"),
])
def test_a_huge_integer_option_is_a_clear_error(tmp_path: Path, capsys, option: str,
                                                says: str) -> None:
    path = write(tmp_path / "r.jsonl", [record()])
    metric = "judge:fluency" if option.startswith("--judge") else "rouge1"
    code, _, err = run(["score", str(path), "-m", metric, "--judge-model", "m", "--offline",
                        option, "99999999999999999999"], capsys)
    assert code == 2, err
    assert says in err and "Traceback" not in err


# ---- texts of the records ------------------------------------------------------------------


def test_a_record_text_holding_a_lone_surrogate_is_judged_repaired_and_said(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    line = record("q2").replace("Ann wrote it.", "Ann \\ud800 wrote it.").replace(
        "Ann wrote the book.", "Ann \\udfff wrote the book.")
    records = write(tmp_path / "r.jsonl", [record("q1"), line])
    with JudgeServer() as server:
        code, _, err = run(["score", str(records), "-m", METRIC, "-m", "rouge1",
                            "--judge-model", "judge-model", "--judge-base-url", server.base_url,
                            "--cache", str(tmp_path / "cache.sqlite"),
                            "--out", str(tmp_path / "out"), "--bootstrap", "10"], capsys)
        sent = json.dumps(server.bodies, ensure_ascii=False)
    assert code == 0, err
    assert "Ann \ufffd wrote it." in sent and "\\ud800" not in sent
    rows = lines(tmp_path)
    assert rows["q2"]["details"]["lone_surrogates"] == ["answer", "contexts[0].text"]
    assert "lone_surrogates" not in rows["q1"]["details"]
    assert rows["q2"]["scores"][METRIC] is not None and rows["q2"]["scores"]["rouge1"] > 0
