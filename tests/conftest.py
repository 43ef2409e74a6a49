"""Shared fixtures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import TEST_KEY, TEST_KEY_ENV, JudgeServer


@pytest.fixture(autouse=True)
def _private_local_judge_notes(tmp_path_factory: pytest.TempPathFactory,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Notes of local judge servers (rageval.judge.local.state) go to a folder of the test
    session's, not the user's runtime or cache folder."""
    folder: Path = tmp_path_factory.getbasetemp() / "xdg-runtime"
    folder.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))


@pytest.fixture(autouse=True, scope="session")
def _phoenix_home_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Importing Phoenix's server package (the test extra's, beside its client) makes its
    working folders, under ~/.phoenix unless told otherwise: here, a folder of the session's
    (set before any module's fixture imports it)."""
    folder: Path = tmp_path_factory.getbasetemp() / "phoenix-home"
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PHOENIX_WORKING_DIR", str(folder))
        yield


@pytest.fixture(autouse=True)
def _not_a_github_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test suite run by GitHub Actions would otherwise give every scoring run of the tests
    the job's outputs (--github is on by itself there): the tests of those set it themselves."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def keyed_judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    """A loopback judge server that wants the key in ``$RAGEVAL_TEST_JUDGE_KEY`` (set)."""
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    with JudgeServer(expected_key=TEST_KEY) as server:
        yield server
