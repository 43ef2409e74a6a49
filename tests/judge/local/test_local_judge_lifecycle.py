"""The local judge's life around the model: ready only after a real completion, an end told
in words (the signal's name, its likely cause and the log's last lines) to ``LocalJudge``, to
``rageval local-judge`` and to a judge run that meets the dead server, a private log file, and
a taken port refused. A stand-in server process (``local_judge_double.py``) plays
llama-cpp-python's part, so these run without the ``local`` extra."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rageval.cli import main
from rageval.judge.local import LocalJudge, LocalJudgeError
from rageval.judge.local import state as local_state

DOUBLE = str(Path(__file__).parents[2] / "local_judge_double.py")


@pytest.fixture(autouse=True)
def _no_servers_of_other_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_state, "_IN_PROCESS", {})


def _double(die: str | None = None, on: str = "completion:1") -> list[str]:
    return ["--die", die, "--on", on] if die else []


class DoubleJudge(LocalJudge):
    ENGINE_MODULE = "json"  # any module that exists: the double needs no engine

    def __init__(self, model: Path, die: str | None = None, on: str = "completion:1",
                 **kw: object) -> None:
        super().__init__(model, name="double", port=0, **kw)  # type: ignore[arg-type]
        self.script = _double(die, on)

    def command(self) -> list[str]:
        return [sys.executable, DOUBLE, "--port", str(self.port), "--name", self.name,
                *self.script]


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF")
    return path


@pytest.mark.parametrize(("die", "words"), [
    ("ILL", ["was killed by SIGILL", "instructions this machine refuses",
             "python -m rageval.judge.local.build --install --force"]),
    ("KILL", ["was killed by SIGKILL", "out-of-memory killer"]),
    ("SEGV", ["was killed by SIGSEGV", "memory fault"]),
    ("3", ["exited with status 3"]),
])
def test_a_server_that_dies_on_its_first_completion_is_never_ready(
        gguf: Path, die: str, words: list[str]) -> None:
    """It listed its model, so a check of /models alone would have called it ready."""
    judge = DoubleJudge(gguf, die=die)
    with pytest.raises(LocalJudgeError) as info:
        judge.start(timeout=60)
    message = str(info.value)
    for word in words:
        assert word in message
    assert "last lines of its log" in message and "ggml: about to run a kernel" in message
    assert judge.pid is None  # stopped


def test_a_judge_run_against_a_local_judge_that_died_says_how(gguf: Path,
                                                             tmp_path: Path) -> None:
    from rageval.api import evaluate
    from rageval.judge.llm.options import JudgeOptions
    from rageval.judge.llm.transport.client import JudgeError

    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"id": "q1", "query": "q", "contexts": ["c"],
                                   "answer": "a"}) + "\n", encoding="utf-8")
    with DoubleJudge(gguf) as judge:
        assert judge.pid is not None
        os.kill(judge.pid, signal.SIGILL)
        _wait_until_dead(judge)
        options = JudgeOptions(model=judge.name, base_url=judge.base_url,
                               cache=str(tmp_path / "c.sqlite"), max_retries=0)
        with pytest.raises(JudgeError) as info:
            evaluate(str(records), ["judge:faithfulness"], judge=options, bootstrap=10)
    message = str(info.value)
    assert f"the local judge on port {judge.port} was killed by SIGILL" in message
    assert "Connection error" not in message


def test_another_process_learns_how_a_local_judge_ended_from_its_note(gguf: Path) -> None:
    judge = DoubleJudge(gguf)
    judge.start(timeout=60)
    try:
        assert judge.pid is not None
        os.kill(judge.pid, signal.SIGKILL)
        _wait_until_dead(judge)
        judge.ended(-signal.SIGKILL)  # what `rageval local-judge` does when wait() returns
        local_state._IN_PROCESS.clear()  # as another process sees it: the note alone
        words = local_state.diagnose(judge.base_url)
    finally:
        judge.stop()
    assert words is not None and "was killed by SIGKILL" in words
    assert "last lines of its log" in words


def test_a_note_of_a_server_whose_port_answers_again_is_not_believed(gguf: Path) -> None:
    """Something listens there now: a connection failure there is not the dead judge's."""
    judge = DoubleJudge(gguf)
    judge.start(timeout=60)
    try:
        judge.ended(-signal.SIGILL)
        local_state._IN_PROCESS.clear()
        assert local_state.diagnose(judge.base_url) is None
    finally:
        judge.stop()
    assert local_state.diagnose("http://example.com:8011/v1") is None


def test_the_command_tells_how_the_server_ended(gguf: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(LocalJudge, "ENGINE_MODULE", "json")
    monkeypatch.setattr(LocalJudge, "command", lambda self: [
        sys.executable, DOUBLE, "--port", str(self.port), "--name", self.name,
        *_double("ILL", "ready:3")])
    out = io.StringIO()
    code = main(["local-judge", "--model", str(gguf), "--port", "0"], stdout=out)
    err = capsys.readouterr().err
    assert code == 1
    assert "local judge ready" in out.getvalue()
    assert "the local judge server was killed by SIGILL" in err
    assert "rebuild it for this machine" in err and "last lines of its log" in err


def test_a_taken_port_is_refused_before_anything_starts(gguf: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        judge = DoubleJudge(gguf)
        judge.port = port
        with pytest.raises(LocalJudgeError, match=rf"port {port} on 127.0.0.1 is taken"):
            judge.start(timeout=60)
    assert judge.pid is None


def test_the_log_is_a_new_private_file_under_a_name_no_one_can_guess(gguf: Path) -> None:
    """Not the predictable /tmp/rageval-local-judge-<port>.log a planted link could redirect:
    a file created anew (O_EXCL), 0600, under a random name; removed when the server is
    stopped on purpose, kept when it died (see the tests above, which read it)."""
    first, second = DoubleJudge(gguf), DoubleJudge(gguf)
    second.port = first.port  # the same port: still another file
    with first:
        log = first.log_path
        assert log.parent == Path(tempfile.gettempdir())
        assert log.name.startswith("rageval-local-judge-") and str(first.port) not in log.name
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        assert "loaded meta data" in log.read_text(encoding="utf-8")
    assert not log.exists()
    with second:
        assert second.log_path != log


def test_exit_statuses_in_words() -> None:
    assert local_state.describe_exit(0) == "exited with status 0"
    assert local_state.describe_exit(-signal.SIGILL).startswith("was killed by SIGILL: an "
                                                                "illegal instruction")
    assert local_state.describe_exit(-signal.SIGUSR1) == "was killed by SIGUSR1"
    assert local_state.describe_exit(-200) == "was killed by signal 200"


def _wait_until_dead(judge: LocalJudge) -> None:
    deadline = time.monotonic() + 30
    while judge.exit_status() is None:
        assert time.monotonic() < deadline, "the server did not die"
        time.sleep(0.05)


def test_an_old_note_of_a_server_long_gone_is_not_believed(gguf: Path) -> None:
    judge = DoubleJudge(gguf)
    judge.start(timeout=60)
    judge.stop()
    local_state.note_start(judge, 2**22 + 12345)  # a pid no process has
    judge.ended(-signal.SIGILL)
    local_state._IN_PROCESS.clear()
    assert local_state.diagnose(judge.base_url) is not None  # fresh: believed
    note = local_state.state_dir() / f"port-{judge.port}.json"
    old = time.time() - local_state.NOTE_LIFETIME_S - 60
    os.utime(note, (old, old))
    assert local_state.diagnose(judge.base_url) is None


def test_llama_server_is_found_and_started_with_what_a_judge_needs(
        gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval.core.errors import UsageError
    from rageval.judge.local import llama_server as llama_server_build

    monkeypatch.delenv("RAGEVAL_LLAMA_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(llama_server_build, "installed_path", lambda: tmp_path / "none")
    with pytest.raises(UsageError, match=r"python -m rageval\.judge\.local\.llama_server"):
        LocalJudge(gguf, engine="llama-server")
    with pytest.raises(UsageError, match="not an executable file"):
        LocalJudge(gguf, engine="llama-server", llama_server=gguf)
    with pytest.raises(UsageError, match="--engine must be one of"):
        LocalJudge(gguf, engine="vllm")
    built = tmp_path / "llama-server"
    built.write_text("#!/bin/sh\n", encoding="utf-8")
    built.chmod(0o755)
    monkeypatch.setattr(llama_server_build, "installed_path", lambda: built)
    judge = LocalJudge(gguf, engine="llama-server", port=0, context=4096, threads=2)
    argv = judge.command()
    assert argv[0] == str(built) and argv[argv.index("--alias") + 1] == judge.name
    assert argv[argv.index("--repeat-penalty") + 1] == "1.1"
    assert argv[argv.index("--parallel") + 1] == "1"
    assert argv[argv.index("--ctx-size") + 1] == "4096"
    assert "--no-cache-prompt" in argv and "--cache-prompt" not in argv  # deterministic
    faster = LocalJudge(gguf, engine="llama-server", port=0, prompt_cache=True).command()
    assert "--cache-prompt" in faster and "--no-cache-prompt" not in faster
    monkeypatch.setenv("RAGEVAL_LLAMA_SERVER", str(built))
    assert LocalJudge(gguf, engine="llama-server").llama_server == built


def test_the_server_log_quoted_on_stderr_cannot_command_a_ci_runner(
        gguf: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The log's last lines are the server's own text: shown escaped, never starting a
    workflow command or sending an ANSI escape."""
    monkeypatch.setattr(LocalJudge, "ENGINE_MODULE", "json")
    monkeypatch.setattr(LocalJudge, "command", lambda self: [
        sys.executable, DOUBLE, "--port", str(self.port), "--name", self.name,
        *_double("ILL", "ready:3")])
    monkeypatch.setattr(LocalJudge, "ended",
                        lambda self, status: "died; log:\n::error::from the log\x1b[2J")
    assert main(["local-judge", "--model", str(gguf), "--port", "0"],
                stdout=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert "from the log" in err and "\x1b" not in err
    assert not any(line.lstrip().startswith("::") for line in err.splitlines())
