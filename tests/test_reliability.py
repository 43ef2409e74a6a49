"""Faults a user meets outside the happy path: interrupted writes, credentials in URLs, quoted
verdicts, replays signed with the wrong endpoint, unwritable paths, dead endpoints, missing
keys, file permissions, conflicting judgments and over-long lines."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import sqlite3
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.cli import main
from rageval.core import results as results_module
from rageval.core.errors import InputError
from rageval.core.outputs import run_directory
from rageval.core.results import Results
from rageval.judge.llm.options import JudgeOptions

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"
SECRET_USER = "PASSWORD-SECRET-123"
SECRET_QUERY = "QUERY-SECRET-456"


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


def write_records(path: Path, n: int = 3) -> Path:
    rows = [{"id": f"q{i}", "query": f"Question {i}?", "answer": f"Answer number {i}.",
             "contexts": [f"Passage {i}a.", f"Passage {i}b."], "reference": f"Reference {i}."}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def score(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(["score", *argv, "--no-progress"], stdout=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out, captured.err


def dead_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


# -- the output pair -----------------------------------------------------------------------


def test_an_interrupted_write_leaves_the_earlier_pair_and_a_torn_pair_is_refused(
        tmp_path: Path, monkeypatch) -> None:
    first = evaluate(str(DEMO), ["mrr"], bootstrap=10)
    first.write(tmp_path / "run")
    second = evaluate(str(DEMO), ["map"], bootstrap=10)

    def dies_at_the_swap(staging: Path, target: Path) -> None:
        assert sorted(p.name for p in staging.iterdir()) == ["records.jsonl", "summary.json"]
        raise KeyboardInterrupt  # every file written, the directory not yet swapped

    monkeypatch.setattr(run_directory, "_exchange", dies_at_the_swap)
    with pytest.raises(KeyboardInterrupt):
        second.write(tmp_path / "run")
    assert list(Results.load(tmp_path / "run").summary) == ["mrr"]  # the earlier run, whole
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # nothing left beside it
    monkeypatch.undo()
    second.write(tmp_path / "run")
    assert list(Results.load(tmp_path / "run").summary) == ["map"]
    # A pair that was not written together (a file copied in by hand) is refused.
    first.write(tmp_path / "other")
    shutil.copy(tmp_path / "other" / "records.jsonl", tmp_path / "run" / "records.jsonl")
    with pytest.raises(InputError, match=r"records\.jsonl is not the one written with "
                                         r"summary\.json"):
        Results.load(tmp_path / "run")
    out = io.StringIO()
    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html")],
                stdout=out) == 2
    assert not (tmp_path / "r.html").exists()


def test_a_reader_that_a_swap_overtakes_reads_the_new_run_whole(tmp_path: Path,
                                                                 monkeypatch) -> None:
    run = tmp_path / "run"
    evaluate(str(DEMO), ["mrr"], bootstrap=10).write(run)
    second = evaluate(str(DEMO), ["map"], bootstrap=10)
    real = results_module.read_summary
    swapped: list[bool] = []

    def then_a_run_is_swapped_in(run_dir: Path):  # type: ignore[no-untyped-def]
        read = real(run_dir)
        if not swapped:
            swapped.append(True)
            second.write(run)  # between the reader's summary and its records
        return read

    monkeypatch.setattr(results_module, "read_summary", then_a_run_is_swapped_in)
    assert list(Results.load(run).summary) == ["map"]
    assert swapped


def test_a_temporary_file_of_a_killed_run_is_cleaned_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    stale = out / ".records.jsonl.999999999-0.tmp"  # no process has this id
    stale.write_text("half a file")
    mine = out / f".summary.json.{os.getpid()}-7.tmp"  # a live writer's: left alone
    mine.write_text("being written")
    # Another machine's writer on a shared volume: its process id means nothing here.
    elsewhere = out / ".records.jsonl.999999999-0~some_other_host.tmp"
    elsewhere.write_text("being written over there")
    evaluate(str(DEMO), ["mrr"], bootstrap=10).write(out)
    assert not stale.exists() and mine.exists() and elsewhere.exists()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "records.jsonl", "summary.json"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        run = tmp_path / "run"
        evaluate(str(DEMO), ["mrr"], bootstrap=10).write(run)
        assert main(["report", str(run), "-o", str(tmp_path / "r.html")],
                    stdout=io.StringIO()) == 0
    finally:
        os.umask(previous)
    for path in (run / "records.jsonl", run / "summary.json", tmp_path / "r.html"):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


# -- validation before anything is created --------------------------------------------------


def test_an_input_error_after_out_creates_no_directory(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1"}\n{"id": \n')
    out = tmp_path / "deep" / "out"
    code, _, err = score([str(bad), "-m", "mrr", "--out", str(out)], capsys)
    assert code == 2 and "line 2" in err
    assert not (tmp_path / "deep").exists()


def test_a_cache_that_cannot_exist_is_one_line_and_exit_2(tmp_path: Path, capsys,
                                                          server: JudgeServer) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    records = write_records(tmp_path / "r.jsonl")
    code, _, err = score([str(records), "-m", "judge:fluency", "--judge-model", "m",
                          "--judge-base-url", server.base_url,
                          "--cache", str(blocker / "sub" / "cache.sqlite"),
                          "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--cache" in err and "is not a directory" in err
    assert server.requests == 0 and not (tmp_path / "out").exists()


def test_a_missing_api_key_creates_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    records = write_records(tmp_path / "r.jsonl")
    code, _, err = score([str(records), "-m", "judge:fluency", "--judge-model", "gpt-4o-mini",
                          "--out", "out"], capsys)
    assert code == 2 and "no API key" in err and "OPENAI_API_KEY" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]  # no .rageval/, no out/


def test_a_missing_key_is_no_error_when_every_reply_is_cached(tmp_path: Path, capsys,
                                                              monkeypatch,
                                                              server: JudgeServer) -> None:
    """The key is needed to ask, not to reuse: a rerun over a full cache needs none."""
    monkeypatch.setenv("RAGEVAL_TEST_KEY", "sk-test")
    records = write_records(tmp_path / "r.jsonl")
    cache = tmp_path / "c.sqlite"
    first = evaluate(str(records), ["judge:fluency"], bootstrap=1, judge=JudgeOptions(
        model="m", base_url=server.base_url, cache=str(cache)))
    assert first.summary["judge:fluency"].n == 3
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # The default endpoint needs a key; the replies are cached under this model, so none
    # is asked for (the cache key does not include the endpoint).
    again = evaluate(str(records), ["judge:fluency"], bootstrap=1,
                     judge=JudgeOptions(model="m", cache=str(cache)))
    assert again.manifest["judge"]["requests"] == 0
    assert [r.scores for r in again.records] == [r.scores for r in first.records]


# -- credentials ---------------------------------------------------------------------------


def test_credentials_in_the_base_url_appear_nowhere(tmp_path: Path, capsys,
                                                    server: JudgeServer) -> None:
    host = server.base_url.removeprefix("http://")
    url = f"http://user:{SECRET_USER}@{host}?api-key={SECRET_QUERY}"
    records = write_records(tmp_path / "r.jsonl")
    cache = tmp_path / "c.sqlite"
    out = tmp_path / "out"
    code, stdout, stderr = score([str(records), "-m", "judge:fluency", "--judge-model", "m",
                                  "--judge-base-url", url, "--cache", str(cache),
                                  "--out", str(out)], capsys)
    assert code == 0
    assert server.paths and all(p.endswith(f"?api-key={SECRET_QUERY}") for p in server.paths)
    report = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(report)], stdout=io.StringIO()) == 0
    with sqlite3.connect(cache) as db:
        stored = "\n".join(str(row) for row in db.execute("SELECT * FROM entries"))
    places = {"stdout": stdout, "stderr": stderr, "summary.json": (out / "summary.json")
              .read_text(), "records.jsonl": (out / "records.jsonl").read_text(),
              "cache": stored, "report.html": report.read_text()}
    for where, text in places.items():
        assert SECRET_USER not in text and SECRET_QUERY not in text, where
    summary = json.loads(places["summary.json"])
    signature = summary["metrics"]["judge:fluency"]["signature"]
    assert f"|endpoint:{server.base_url}|" in signature  # scheme, host, port and path
    assert summary["manifest"]["judge"]["endpoint"] == server.base_url
    # A failing run's error names the endpoint without its secrets too.
    server.always = "403"
    code, stdout, stderr = score([str(records), "-m", "judge:fluency", "--judge-model", "m2",
                                  "--judge-base-url", url, "--cache", str(cache)], capsys)
    assert code == 2 and "HTTP 403" in stderr and "***" in stderr
    assert SECRET_USER not in stderr + stdout and SECRET_QUERY not in stderr + stdout


# -- judge replies and signatures ----------------------------------------------------------


def test_a_quoted_later_verdict_never_lends_its_score(tmp_path: Path,
                                                      server: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", n=2)
    server.always = "quoted_verdict"
    results = evaluate(str(records), ["judge:fluency"], bootstrap=1, judge=JudgeOptions(
        model="m", base_url=server.base_url, cache=str(tmp_path / "c.sqlite")))
    for row in results.records:
        assert row.scores["judge:fluency"] is None
        assert "the reply holds conflicting verdicts: score" in row.errors["judge:fluency"]
        assert row.details["judge:fluency"]["reasoning"] == "Graded on the rubric."


def test_a_replay_signs_with_the_endpoint_that_recorded_the_replies(
        tmp_path: Path, server: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl")
    cache = tmp_path / "c.sqlite"
    server.refuse = {"json_schema": 500}  # as llama.cpp does
    recorded = evaluate(str(records), ["judge:fluency"], bootstrap=1, judge=JudgeOptions(
        model="m", base_url=server.base_url, cache=str(cache)))
    for base_url in (None, "https://elsewhere.example/v1"):
        replay = evaluate(str(records), ["judge:fluency"], bootstrap=1, judge=JudgeOptions(
            model="m", base_url=base_url, cache=str(cache), offline=True))
        signature = replay.summary["judge:fluency"].signature
        assert f"|endpoint:{server.base_url}|" in signature
        assert "|response_format:json_object+schema|" in signature
        assert signature == recorded.summary["judge:fluency"].signature
        assert replay.manifest["judge"]["endpoint"] is None
        assert replay.manifest["judge"]["endpoints_used"] == {server.base_url: 3}


def test_replies_are_found_under_the_format_that_produced_them(
        tmp_path: Path, server: JudgeServer) -> None:
    """A run against a server that refused json_schema stored its replies under the
    json_object+schema keys: a replay in auto mode finds them, one that insists on
    json_schema does not (it would be a different request)."""
    records = write_records(tmp_path / "r.jsonl")
    cache = tmp_path / "c.sqlite"
    server.refuse = {"json_schema": 500}
    evaluate(str(records), ["judge:fluency"], bootstrap=1, judge=JudgeOptions(
        model="m", base_url=server.base_url, cache=str(cache)))
    assert server.requests == 3 + 1  # one refused probe, never retried
    auto = evaluate(str(records), ["judge:fluency"], bootstrap=1, judge=JudgeOptions(
        model="m", cache=str(cache), offline=True))
    assert auto.summary["judge:fluency"].n == 3
    strict = evaluate(str(records), ["judge:fluency"], bootstrap=1, judge=JudgeOptions(
        model="m", cache=str(cache), offline=True, allow_missing=True,
        response_format="json_schema"))
    assert strict.summary["judge:fluency"].n == 0


# -- runs that score nothing ---------------------------------------------------------------


def test_a_dead_endpoint_fails_the_run_with_one_clear_line(tmp_path: Path, capsys) -> None:
    records = write_records(tmp_path / "r.jsonl", n=6)
    url = dead_url()
    code, _, err = score([str(records), "-m", "judge:fluency", "--judge-model", "m",
                          "--judge-base-url", url, "--cache", str(tmp_path / "c.sqlite"),
                          "--judge-max-retries", "1", "--out", str(tmp_path / "out")], capsys)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"judge endpoint {url}" in lines[0]
    assert "the connection was refused" in lines[0]  # at once: no retry
    assert not (tmp_path / "out").exists()


def _two_records_answered(tmp_path: Path, capsys, server: JudgeServer,
                          fault: str) -> tuple[int, str, Path]:
    """A run of two records whose every judge request gets ``fault``, no retries: its exit
    status, its stderr and its --out."""
    records = write_records(tmp_path / "r.jsonl", n=2)
    server.always = fault
    out = tmp_path / "out"
    code, _, err = score([str(records), "-m", "judge:fluency", "-m", "rouge1",
                          "--judge-model", "m", "--judge-base-url", server.base_url,
                          "--cache", str(tmp_path / "c.sqlite"), "--judge-max-retries", "0",
                          "--out", str(out)], capsys)
    return code, err, out


def test_a_judge_that_answered_none_of_two_requests_stops_the_run(
        tmp_path: Path, capsys, server: JudgeServer) -> None:
    """Two requests, both failing: too few to stop early, and still a dead judge."""
    code, err, out = _two_records_answered(tmp_path, capsys, server, "503")
    assert code == 2
    assert err.strip() == (
        f"rageval: error: judge endpoint {server.base_url} (model 'm') is taken for dead, and "
        "the run stopped: no reply to any of the 2 requests sent, all failing alike "
        "(--judge-timeout and --judge-max-retries set the patience per request): HTTP 503: "
        "The server had an error processing your request.")
    assert not out.exists()


def test_a_metric_that_scored_nothing_fails_the_run(tmp_path: Path, capsys,
                                                    server: JudgeServer) -> None:
    """Two replies, neither usable: the run must not pass."""
    code, err, out = _two_records_answered(tmp_path, capsys, server, "prose")
    assert code == 1
    assert err.strip().startswith("rageval: error: judge:fluency scored none of the 2 records: "
                                  "2 x judge reply not usable")
    assert (out / "summary.json").exists()  # what was computed is written all the same


def test_partial_failures_still_pass(tmp_path: Path, capsys, server: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", n=3)
    server.fail_next("503")
    out = tmp_path / "out"
    code, printed, err = score([str(records), "-m", "judge:fluency", "--judge-model", "m",
                                "--judge-base-url", server.base_url, "--judge-concurrency",
                                "1", "--judge-response-format", "text",
                                "--judge-max-retries", "0", "--cache",
                                str(tmp_path / "c.sqlite"), "--out", str(out)], capsys)
    assert code == 0 and "error" not in err
    reason = "judge request failed: HTTP 503: The server had an error processing your request."
    assert f"judge:fluency: 1 unscored: {reason}" in printed
    item = json.loads((out / "summary.json").read_text())["metrics"]["judge:fluency"]
    assert (item["n"], item["unscored"], item["unscored_reasons"]) == (2, 1, {reason: 1})
    lines = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert sum(line["scores"]["judge:fluency"] is None for line in lines) == 1


def test_judge_options_from_the_command_line(tmp_path: Path, capsys,
                                             server: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", n=2)
    out = tmp_path / "out"
    code, _, _ = score([str(records), "-m", "judge:fluency", "--judge-model", "m",
                        "--judge-base-url", server.base_url, "--judge-response-format",
                        "json_object", "--judge-timeout", "7.5", "--judge-max-retries", "2",
                        "--cache", str(tmp_path / "c.sqlite"), "--out", str(out)], capsys)
    assert code == 0
    assert all(b["response_format"]["type"] == "json_object" for b in server.bodies)
    manifest = json.loads((out / "summary.json").read_text())["manifest"]["judge"]
    assert manifest["timeout_s"] == 7.5 and manifest["max_retries"] == 2
    assert manifest["response_format"] == {"mode": "json_object",
                                           "used": {"json_object+schema": 2}, "refused": {}}
    for bad, words in ((["--judge-timeout", "0"], "--judge-timeout must be a positive"),
                       (["--judge-max-retries", "-1"], "--judge-max-retries must be an integer"),
                       (["--judge-response-format", "xml"], "invalid choice: 'xml'")):
        code, _, err = score([str(records), "-m", "judge:fluency", "--judge-model", "m",
                              "--judge-base-url", server.base_url, *bad], capsys)
        assert code == 2 and words in err


def test_max_tokens_caps_the_reply_and_says_so(tmp_path: Path, server: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", n=2)
    options = JudgeOptions(model="m", base_url=server.base_url, cache=str(tmp_path / "c.sqlite"),
                           max_tokens=4)
    results = evaluate(str(records), ["judge:fluency"], judge=options, bootstrap=1)
    assert all(b["max_tokens"] == 4 for b in server.bodies)
    for row in results.records:
        assert row.scores["judge:fluency"] is None
        assert row.errors["judge:fluency"].endswith("(the reply was cut at the token limit)")
    assert "|max_tokens:4|" in results.summary["judge:fluency"].signature
    # The limit is part of every cache key: a run without it asks again.
    again = evaluate(str(records), ["judge:fluency"], bootstrap=1, judge=JudgeOptions(
        model="m", base_url=server.base_url, cache=str(tmp_path / "c.sqlite")))
    assert again.manifest["judge"]["requests"] == 2
    assert again.summary["judge:fluency"].n == 2


# -- inputs --------------------------------------------------------------------------------


def test_a_qrels_conflict_names_the_records_file(tmp_path: Path, capsys) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n")
    code, _, err = score([str(DEMO), "-m", "mrr", "--qrels", str(qrels)], capsys)
    assert code == 2
    assert f"inline judgments in {DEMO}" in err and "<memory>" not in err


def test_an_over_long_line_is_refused_before_it_is_read_whole(tmp_path: Path, capsys) -> None:
    path = tmp_path / "big.jsonl"
    line = json.dumps({"id": "q2", "answer": "x" * 5000})
    path.write_text('{"id": "q1", "answer": "short"}\n' + line + "\n")
    code, _, err = score([str(path), "-m", "rouge1", "--max-line-bytes", "1000"], capsys)
    assert code == 2
    assert f"{path}, line 2: line longer than 1,000 bytes" in err
    assert "--max-line-bytes" in err
    code, _, err = score([str(path), "-m", "judge:fluency", "--judge-model", "m",
                          "--max-line-bytes", str(len(line)), "--offline", "--allow-missing",
                          "--cache", str(tmp_path / "none.jsonl")], capsys)
    assert "line longer" not in err  # the line fits exactly


def test_a_judge_that_answered_earlier_in_the_run_is_not_taken_for_dead(
        tmp_path: Path, capsys, server: JudgeServer) -> None:
    """The first window's requests answered, every request of the second failing: the judge
    answered in this run, so the second window's records are unscored with the reason and the
    run goes on (a judge is dead only when it has answered nothing in the run)."""
    records = write_records(tmp_path / "r.jsonl", n=4)
    server.fail_next(None, None, *["503"] * 8)
    out = tmp_path / "out"
    code, _, err = score([str(records), "-m", "judge:fluency", "-m", "rouge1",
                          "--judge-model", "m", "--judge-base-url", server.base_url,
                          "--cache", str(tmp_path / "c.sqlite"), "--judge-max-retries", "0",
                          "--judge-concurrency", "1", "--window", "2", "--out", str(out)],
                         capsys)
    assert code == 0, err
    assert "taken for dead" not in err
    summary = json.loads((out / "summary.json").read_text())["metrics"]["judge:fluency"]
    assert (summary["n"], summary["unscored"]) == (2, 2)
