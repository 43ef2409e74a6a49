"""A panel member whose judge answers nothing fails as a single judge does: the run stops with
the single judge's message, whatever the number of records, unless --panel-min-members lets
the panel go on with the members that answer (said in the signature, the summary, the
manifest, the terminal and the GitHub annotations)."""

from __future__ import annotations

import io
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import UsageError
from rageval.gate.github import annotations
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.transport.requests import JudgeError

KEY = "sk-test-panel-dead"
ENV = "RAGEVAL_TEST_PANEL_DEAD_KEY"
METRICS = ["judge:faithfulness", "judge:correctness"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(ENV, KEY)
    with JudgeServer(expected_key=KEY) as judge:
        yield judge


@pytest.fixture
def dead_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _records(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"q{i}", "query": f"What is fact {i}?", "contexts": [f"Fact {i} is blue."],
        "answer": f"Fact {i}: blue.", "reference": "Blue."}) + "\n" for i in range(n)))
    return path


def _judge(server: JudgeServer, cache: Path, members: list[dict[str, object]],
           **kw: object) -> JudgeOptions:
    settings: dict[str, object] = {"timeout": 5.0, "max_retries": 1, **kw}
    return JudgeOptions(model="judge-model", base_url=server.base_url, api_key_env=ENV,
                        cache=str(cache), panel=tuple(members), **settings)  # type: ignore[arg-type]


def _members(dead_url: str) -> list[dict[str, object]]:
    return [{"name": "alive", "seed": 1}, {"name": "also", "seed": 2},
            {"name": "dead", "seed": 3, "base_url": dead_url}]


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved, sys.stderr = sys.stderr, err
    try:
        code = main(argv, stdout=out)
    finally:
        sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def test_a_dead_member_stops_three_records_as_it_stops_eight(
        tmp_path: Path, server: JudgeServer, dead_url: str) -> None:
    """Three records used to go on (the dead member abstaining everywhere, the gate passing
    on the others), eight to stop: now both stop, with one message."""
    messages = []
    for n in (3, 8):
        judge = _judge(server, tmp_path / "c.sqlite", _members(dead_url))
        with pytest.raises(JudgeError) as info:
            evaluate(_records(tmp_path / f"r{n}.jsonl", n), METRICS, judge=judge, bootstrap=5)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"judge endpoint {dead_url} (model 'judge-model'): the "
                                  "connection was refused")


def test_a_dead_member_stops_the_command_with_the_single_judge_s_message(
        tmp_path: Path, server: JudgeServer, dead_url: str) -> None:
    records = _records(tmp_path / "r.jsonl", 3)
    common = ["score", str(records), "-m", "judge:faithfulness", "--judge-model", "judge-model",
              "--judge-api-key-env", ENV, "--cache", str(tmp_path / "c.sqlite"),
              "--no-progress", "--bootstrap", "5"]
    single = _cli([*common, "--judge-base-url", dead_url, "--out", str(tmp_path / "one")])
    panel = _cli([*common, "--judge-base-url", server.base_url, "--judge",
                  "name=alive,seed=1", "--judge", f"name=dead,seed=2,base_url={dead_url}",
                  "--out", str(tmp_path / "panel")])
    assert single[0] == panel[0] == 2
    assert panel[2] == single[2] and "the connection was refused" in panel[2]
    assert not (tmp_path / "panel").exists()


def test_a_member_that_answers_nothing_stops_the_run_whatever_the_failure(
        tmp_path: Path, server: JudgeServer) -> None:
    """Not only a refused connection: an endpoint failing every request stops a run of three
    records (too few requests to stop early) as it stops one of eight."""
    with JudgeServer() as failing:
        failing.always = "503"
        url = failing.base_url
        members = [{"name": "alive", "seed": 1},
                   {"name": "failing", "seed": 2, "base_url": failing.base_url}]
        messages = []
        for n in (3, 8):
            judge = _judge(server, tmp_path / "c.sqlite", members, max_retries=0)
            with pytest.raises(JudgeError) as info:
                evaluate(_records(tmp_path / f"r{n}.jsonl", n), ["judge:faithfulness"],
                         judge=judge, bootstrap=5)
            messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert messages[0] == (
        f"judge endpoint {url} (model 'judge-model') is taken for dead, and the run stopped: "
        "no reply to any of the 3 requests sent, all failing alike (--judge-timeout and "
        "--judge-max-retries set the patience per request): HTTP 503: The server had an error "
        "processing your request.")


def test_panel_min_members_lets_the_panel_go_on_and_says_so(
        tmp_path: Path, server: JudgeServer, dead_url: str) -> None:
    records = _records(tmp_path / "r.jsonl", 3)
    judge = _judge(server, tmp_path / "c.sqlite", _members(dead_url), panel_min_members=2)
    results = evaluate(records, METRICS, judge=judge, bootstrap=5, out=tmp_path / "run")
    assert server.requests == 3 * 2 * 2  # three records, two rubrics, the two that answer
    for name in METRICS:
        summary = results.summary[name]
        assert summary.n == 3 and summary.unscored == 0  # every record scored by the others
        assert "|min_members:2|" in summary.signature
        panel = summary.figures["panel"]
        assert panel["min_members"] == 2
        assert panel["members"]["dead"] == {"mean": None, "abstained": 3, "left_out": True}
        assert panel["members"]["alive"]["abstained"] == 0
        for row in results.records:
            detail = row.details[name]
            assert detail["left_out"] == ["dead"] and detail["members"]["dead"] is None
            assert detail["abstained"]["dead"].startswith(
                "left out of the panel (--panel-min-members 2): judge endpoint "
                f"{dead_url} (model 'judge-model'): the connection was refused")
            assert row.scores[name] == pytest.approx(
                (detail["members"]["alive"] + detail["members"]["also"]) / 2)
    section = results.manifest["judge_panel"]
    assert section["min_members"] == 2 and list(section["left_out"]) == ["dead"]
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["metrics"]["judge:faithfulness"]["panel"]["members"]["dead"]["left_out"]
    warnings = [line for line in annotations(results, None) if "left out" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith("::warning title=rageval judge::panel member 'dead' left out "
                                  "(--panel-min-members 2), the others grading without it: "
                                  f"judge endpoint {dead_url}")
    assert warnings[0].endswith("; every record is still scored")
    assert not any("unscored" in line for line in annotations(results, None))


def test_the_terminal_names_the_member_left_out(tmp_path: Path, server: JudgeServer,
                                                dead_url: str) -> None:
    code, out, _ = _cli([
        "score", str(_records(tmp_path / "r.jsonl", 3)), "-m", "judge:faithfulness",
        "--judge-model", "judge-model", "--judge-base-url", server.base_url,
        "--judge-api-key-env", ENV, "--cache", str(tmp_path / "c.sqlite"), "--judge",
        "name=alive,seed=1", "--judge", f"name=dead,seed=2,base_url={dead_url}",
        "--panel-min-members", "1", "--no-progress", "--bootstrap", "5",
        "--out", str(tmp_path / "run")])
    assert code == 0
    text = " ".join(out.split())
    assert "dead left out (its judge stopped; 3 abstained)" in text
    assert "went on with 1 of 2 members (--panel-min-members 1)" in text
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metrics"]["judge:faithfulness"]["panel"]["min_members"] == 1


def test_fewer_members_answering_than_the_minimum_stop_the_run(
        tmp_path: Path, server: JudgeServer, dead_url: str) -> None:
    judge = _judge(server, tmp_path / "c.sqlite", _members(dead_url), panel_min_members=3)
    with pytest.raises(JudgeError) as info:
        evaluate(_records(tmp_path / "r.jsonl", 3), METRICS, judge=judge, bootstrap=5)
    message = str(info.value)
    assert message.startswith(f"judge endpoint {dead_url} (model 'judge-model'): the "
                              "connection was refused")
    assert message.endswith("panel member 'dead' is left out, and 2 members of the panel's 3 "
                            "answer, fewer than --panel-min-members 3")


def test_bad_minimums_are_usage_errors(tmp_path: Path) -> None:
    def judge(**kw: object) -> JudgeOptions:
        return JudgeOptions(model="m", base_url="http://127.0.0.1:9/v1", **kw)  # type: ignore[arg-type]

    two = ({"seed": 1}, {"seed": 2})
    with pytest.raises(UsageError, match="--panel-min-members applies to a judge panel"):
        judge(panel_min_members=1).check()
    with pytest.raises(UsageError, match="--panel-min-members must be an integer of at least 1"):
        judge(panel=two, panel_min_members=0).check()
    with pytest.raises(UsageError, match="--panel-min-members 3: the panel has only 2 members"):
        judge(panel=two, panel_min_members=3).check()
    toml = tmp_path / "eval.toml"
    toml.write_text(f'metrics = ["judge:faithfulness"]\n[inputs]\nrecords = "r.jsonl"\n'
                    f'[judge]\nmodel = "m"\npanel = ["seed=1", "seed=2"]\n'
                    f'panel_min_members = 5\ncache = "{tmp_path / "c.sqlite"}"\n')
    _records(tmp_path / "r.jsonl", 1)
    code, _, err = _cli(["run", str(toml), "--no-progress"])
    assert code == 2 and "--panel-min-members 5: the panel has only 2 members" in err
