"""A real MLflow tracking server for the tests: ``mlflow server`` started on 127.0.0.1 on a
free port, its SQLite store and its artifacts in a temporary directory, stopped afterwards.

Skipped, with the reason, where MLflow is not installed (the ``mlflow`` extra brings it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

import pytest
from server_health import wait_until_healthy

from rageval.judge.local.server import free_port

START_SECONDS = 180.0


def need_mlflow() -> None:
    pytest.importorskip("mlflow", reason="the MLflow tests need mlflow: pip install "
                        "'rageval[mlflow]'")


class MlflowServer:
    """One ``mlflow server`` process; :attr:`url` is its tracking URI."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> MlflowServer:
        log = open(self.workdir / "server.log", "wb")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{self.workdir / 'mlflow.db'}",
             "--artifacts-destination", str(self.workdir / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
            env={**os.environ, "MLFLOW_TRACKING_URI": ""},
            start_new_session=True)  # its own group: the server starts uvicorn and a job runner
        log.close()
        if wait_until_healthy(self._process, f"{self.url}/health", START_SECONDS):
            return self
        self.__exit__(None, None, None)
        tail = (self.workdir / "server.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"mlflow server did not start:\n{tail}")

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._process is None:
            return
        group = self._process.pid  # the group the server leads, its children with it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=20)
        # Its job runner's workers may outlive it: whatever is left of the group goes now.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        self._process.wait()
