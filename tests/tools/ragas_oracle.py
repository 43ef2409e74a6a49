"""ragas from PyPI as the oracle of the tool-call metrics, in a virtual environment of its own.

ragas 0.4.3 pins versions of openai, rich and tenacity older than rageval's, so it cannot share
rageval's environment: the first test that asks for it makes ``.oracles/ragas-0.4.3`` in the
checkout (about 40 s and 800 MB from PyPI) and reuses it after. Without PyPI the tests skip
with the reason; under CI (``CI=true``), where the oracle must run, they fail instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

RAGAS = "ragas==0.4.3"
# langchain-community 0.4.2 breaks ``import ragas`` 0.4.3: the last release it imports with.
PINS = (RAGAS, "langchain-community==0.4.1")
HOME = Path(__file__).resolve().parents[2] / ".oracles" / "ragas-0.4.3"
SCORER = Path(__file__).with_name("ragas_score.py")
MULTI_TURN = Path(__file__).with_name("ragas_multi_turn.py")


def ragas_python() -> Path:
    """The oracle environment's interpreter, made on first use."""
    python = HOME / "bin" / "python"
    ready = HOME / "ready"
    if ready.exists():
        return python
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(HOME)], check=True,
                       capture_output=True, timeout=300)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PINS], check=True,
                       capture_output=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as error:
        detail = getattr(error, "stderr", b"") or b""
        message = (f"the ragas oracle needs {' '.join(PINS)} in a virtual environment of its "
                   f"own, which could not be made: {error} {detail.decode()[-500:]}")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    ready.write_text(" ".join(PINS) + "\n")
    return python


def ragas_scores(cases: list[dict[str, Any]]) -> list[dict[str, float]]:
    """ragas' ``ToolCallF1`` and ``ToolCallAccuracy`` (strict and any order) of each case
    (``{"calls": [...], "expected": [...]}``, calls as ``{"name", "arguments"}``)."""
    return _run(SCORER, cases)


def ragas_multi_turn(cases: list[dict[str, Any]], jsonl: Path) -> list[dict[str, float]]:
    """Each case (a conversation: ``{"turns": [{"query", "calls", "results", "answer"}],
    "expected": [...]}``) built as ragas' ``MultiTurnSample`` and written by ragas to
    ``jsonl``; ragas' ``ToolCallF1`` and ``ToolCallAccuracy`` of each."""
    return _run(MULTI_TURN, cases, str(jsonl))


def _run(script: Path, cases: list[dict[str, Any]], *args: str) -> list[dict[str, float]]:
    python = ragas_python()
    with tempfile.TemporaryDirectory() as home:  # where ragas could write its user files
        env = {**os.environ, "HOME": home, "RAGAS_DO_NOT_TRACK": "true"}
        done = subprocess.run([str(python), str(script), *args], input=json.dumps(cases),
                              env=env, capture_output=True, text=True, timeout=600,
                              check=False)
    if done.returncode != 0:
        raise AssertionError(f"the ragas script {script.name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)
