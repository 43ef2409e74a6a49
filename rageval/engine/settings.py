"""How a run is scored and summarised: :class:`RunSettings`, checked once when it is built,
before anything is read, sent or written."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rageval.core.errors import LARGEST_COUNT, MOST_RESAMPLES, UsageError, check_int
from rageval.core.files import creatable
from rageval.engine.sink import FileSink
from rageval.stats.poisson import EXACT_RECORDS

if TYPE_CHECKING:
    from rageval.engine.local import Engine

__all__ = ["CI_METHODS", "DEFAULT_RAY_WINDOW", "DEFAULT_WINDOW", "ENGINES", "RunSettings"]

#: What can score a run's batches: this process, or a Ray cluster.
ENGINES = ("local", "ray")

#: How the summary's CIs are drawn: the records (a percentile bootstrap; past
#: rageval.stats.poisson.EXACT_RECORDS records, running sums with Poisson weights), for a
#: metric judged with several samples the records and then each record's samples (two
#: levels), or running sums with Poisson weights from the first record.
CI_METHODS = ("records", "judge-noise", "poisson")

#: Records read and scored together when a records file is streamed: large enough that the
#: judge keeps its requests flowing across batches, small enough that a window's records and
#: their derived data stay a few tens of MB.
DEFAULT_WINDOW = 10_000
#: The window on Ray: each window gets its own pool of actors, which load their models again
#: (BERTScore's), so a window there holds more blocks.
DEFAULT_RAY_WINDOW = 100_000


@dataclass(frozen=True)
class RunSettings:
    """The settings of a run that change no value: the bootstrap's ``seed`` and resample
    count, the ``batch_size`` records are scored in, the ``window`` a records file is read in
    (None: :data:`DEFAULT_WINDOW`, or :data:`DEFAULT_RAY_WINDOW` on Ray), the ``engine`` and
    its Ray cluster, the run directory ``out`` the results are written to as they finish,
    ``ci``, how the summary's intervals are drawn (one of :data:`CI_METHODS`), and
    ``turn_thresholds``, the value under which a turn of a conversation fails, by output.

    Building one checks every setting, so a run stops on a bad one before it reads a record.
    """

    seed: int = 0
    bootstrap: int = 1000
    batch_size: int = 1000
    window: int | None = None
    engine: str = "local"
    ray_address: str | None = None
    ray_workers: int | None = None
    out: str | os.PathLike[str] | None = None
    ci: str = "records"
    # Output name -> the value under which a turn fails, for conversations.jsonl's
    # "first_failing" (rageval.core.results.conversations).
    turn_thresholds: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value, low, high in (
                ("seed", self.seed, 0, None), ("bootstrap", self.bootstrap, 1, MOST_RESAMPLES),
                ("batch_size", self.batch_size, 1, LARGEST_COUNT)):
            check_int(name, value, low, high=high)
        if self.window is not None:
            check_int("the window size", self.window, 1, high=LARGEST_COUNT)
        if self.ci not in CI_METHODS:
            raise UsageError(f"unknown ci {self.ci!r}: use one of {', '.join(CI_METHODS)}")
        if self.engine not in ENGINES:
            raise UsageError(f"unknown engine {self.engine!r}: use one of {', '.join(ENGINES)}")
        if self.engine == "local" and (self.ray_address is not None
                                       or self.ray_workers is not None):
            raise UsageError("ray_address and ray_workers go with engine='ray'")
        for name, value in self.turn_thresholds.items():
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value)):
                raise UsageError(f"turn threshold {name}: expected a finite number, got "
                                 f"{value!r}")
        if self.out is not None and (problem := creatable(self.out)) is not None:
            raise UsageError(f"out {os.fspath(self.out)}: cannot write the results there: "
                             f"{problem}")

    @property
    def resample_samples(self) -> bool:
        """Whether a metric's CI resamples the samples within each record too."""
        return self.ci == "judge-noise"

    @property
    def exact_records(self) -> int | None:
        """Up to how many records the summary keeps every value (0: none)."""
        return 0 if self.ci == "poisson" else EXACT_RECORDS

    @property
    def window_size(self) -> int:
        """The records read and scored together from a records file."""
        if self.window is not None:
            return self.window
        return DEFAULT_RAY_WINDOW if self.engine == "ray" else DEFAULT_WINDOW

    def sink(self) -> FileSink | None:
        """Where the per-record results go as they finish (None: kept in memory)."""
        return FileSink(self.out) if self.out is not None else None

    @contextlib.contextmanager
    def scorer(self) -> Iterator[Engine | None]:
        """The engine that scores the batches, open for the run (None: this process)."""
        if self.engine == "local":
            yield None
            return
        from rageval.engine.ray_engine import RayEngine

        with RayEngine(self.ray_address, self.ray_workers) as engine:
            yield engine
