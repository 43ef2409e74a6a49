"""Waiting for a server the tests started: its health URL answers 200 before a deadline, or the
process ends first."""

from __future__ import annotations

import subprocess
import time
import urllib.request


def wait_until_healthy(process: subprocess.Popen, url: str, seconds: float) -> bool:  # type: ignore[type-arg]
    """Whether ``url`` answered 200 within ``seconds`` while ``process`` was running."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            time.sleep(0.3)
    return False
