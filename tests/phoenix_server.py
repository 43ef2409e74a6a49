"""A real Arize Phoenix server for the tests: ``arize-phoenix`` from PyPI, started on
127.0.0.1 on free ports with its SQLite storage in a temporary directory, stopped afterwards.

Skipped, with the reason, where ``arize-phoenix`` is not installed (the ``test`` extra brings
it); with ``CI=true`` a missing one fails instead.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType

import pytest
from server_health import wait_until_healthy

from rageval.judge.local.server import free_port

START_SECONDS = 120.0


def need_phoenix() -> None:
    if importlib.util.find_spec("phoenix.server") is None:
        message = "the Phoenix round trip needs a Phoenix server: pip install arize-phoenix"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


class PhoenixServer:
    """One Phoenix server process; :attr:`url` is its base URL, :attr:`otlp` where spans go."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.otlp = f"{self.url}/v1/traces"
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PhoenixServer:
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(self.workdir),
               "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(self.port),
               "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_TELEMETRY_ENABLED": "false"}
        env.pop("PHOENIX_API_KEY", None)
        log = open(self.workdir / "server.log", "wb")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "phoenix.server.main", "serve"], env=env, stdout=log,
            stderr=subprocess.STDOUT, cwd=self.workdir)
        log.close()
        if wait_until_healthy(self._process, f"{self.url}/healthz", START_SECONDS):
            return self
        self.__exit__(None, None, None)
        tail = (self.workdir / "server.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"Phoenix did not start:\n{tail}")

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
