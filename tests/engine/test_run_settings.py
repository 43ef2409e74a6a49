"""A run's settings are checked once, when they are built, before anything is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from rageval.core.errors import UsageError
from rageval.engine.settings import DEFAULT_RAY_WINDOW, DEFAULT_WINDOW, RunSettings
from rageval.engine.sink import FileSink


@pytest.mark.parametrize(("settings", "says"), [
    ({"seed": -1}, "seed must be an integer of at least 0, got -1"),
    ({"bootstrap": 0}, "bootstrap must be an integer from 1 to 10,000,000, got 0"),
    ({"bootstrap": 10**20}, "bootstrap must be an integer from 1 to 10,000,000, got "
                            "100000000000000000000"),
    ({"batch_size": True}, "batch_size must be an integer from 1 to 4,611,686,018,427,387,904, "
                           "got True"),
    ({"batch_size": 10**20}, "batch_size must be an integer from 1 to "
                             "4,611,686,018,427,387,904, got 100000000000000000000"),
    ({"window": 0}, "the window size must be an integer from 1 to 4,611,686,018,427,387,904, "
                    "got 0"),
    ({"window": 2.5}, "the window size must be an integer from 1 to "
                      "4,611,686,018,427,387,904, got 2.5"),
    ({"window": 10**20}, "the window size must be an integer from 1 to "
                         "4,611,686,018,427,387,904, got 100000000000000000000"),
    ({"engine": "spark"}, "unknown engine 'spark': use one of local, ray"),
    ({"ray_workers": 2}, "ray_address and ray_workers go with engine='ray'"),
    ({"ray_address": "auto"}, "ray_address and ray_workers go with engine='ray'"),
])
def test_a_bad_setting_is_a_usage_error_naming_it(settings: dict, says: str) -> None:
    with pytest.raises(UsageError) as caught:
        RunSettings(**settings)
    assert str(caught.value) == says


def test_an_out_directory_that_cannot_be_made_is_refused_before_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="cannot write the results there"):
        RunSettings(out=blocker / "run")
    assert not (blocker.parent / "run").exists()


def test_the_window_defaults_by_engine_and_the_sink_follows_out(tmp_path: Path) -> None:
    assert RunSettings().window_size == DEFAULT_WINDOW
    assert RunSettings(engine="ray").window_size == DEFAULT_RAY_WINDOW
    assert RunSettings(engine="ray", window=7).window_size == 7
    assert RunSettings().sink() is None
    sink = RunSettings(out=tmp_path / "run").sink()
    assert isinstance(sink, FileSink) and sink.directory == tmp_path / "run"
    assert not (tmp_path / "run").exists()  # made only when the first results come


def test_the_local_engine_is_this_process() -> None:
    with RunSettings().scorer() as scorer:
        assert scorer is None
