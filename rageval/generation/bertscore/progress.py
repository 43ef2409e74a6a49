"""How much embedding work BERTScore has done: process-wide counters of the work (forward
passes, cache hits and writes, model loads), for tests and benchmarks, and how far a run's
embedding is, told to the run's step hook (``ScoreOptions.steps``).

The run's count is of distinct texts (answers and references) of the run whose embeddings are
ready, from a cache or from the model; the total is every distinct text of the records the run
scores. A text counts once, however many batches or BERTScore metrics of the same model need it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rageval.core.metric import Slot

if TYPE_CHECKING:
    from rageval.core.metric import Batch
    from rageval.core.progress import StepProgress
    from rageval.core.records import Record


_STATS: Counter = Counter()


def cache_stats() -> dict[str, int]:
    """Counters since the last reset: ``forward_passes``, ``texts_embedded``, ``memory_hits``,
    ``disk_hits``, ``disk_writes`` (entries written), ``disk_packs`` (pack files written),
    ``disk_corrupt`` (packs or entries found damaged, and recomputed), ``model_loads``."""
    keys = ("forward_passes", "texts_embedded", "memory_hits", "disk_hits", "disk_writes",
            "disk_packs", "disk_corrupt", "model_loads")
    return {k: int(_STATS[k]) for k in keys}


def reset_cache_stats() -> None:
    _STATS.clear()


class EmbeddingTally:
    """The distinct texts whose embeddings are ready, reported as they become so."""

    def __init__(self, steps: StepProgress, step: str, total: int) -> None:
        self.steps = steps
        self.step = step
        self.total = total
        self.ready: set[str] = set()
        self.cached = 0

    def __call__(self, texts: Sequence[str], cached: bool) -> None:
        new = [text for text in texts if text not in self.ready]
        if not new:
            return
        self.ready.update(new)
        if cached:
            self.cached += len(new)
        # A caller that scores records outside the run's scope would pass the total: the
        # count then carries the total with it rather than overshoot.
        self.total = max(self.total, len(self.ready))
        info = f"{self.cached:,} from cache" if self.cached else ""
        self.steps(self.step, len(self.ready), self.total, info)


def embedding_tally(batch: Batch, namespace: str, model: str, steps: StepProgress,
                    texts: Callable[[Sequence[Record]], set[str]]) -> EmbeddingTally:
    """The run's tally for one model and layer (``namespace``), kept in the run's cache so
    that every batch and every BERTScore metric of that model shares it; ``texts`` gives the
    distinct texts a list of records needs embedded."""
    scope = batch.scope

    def build() -> EmbeddingTally:
        label = os.path.basename(model.rstrip("/\\")) or model
        return EmbeddingTally(steps, f"bertscore embedding ({label})", len(texts(scope)))

    return batch.run.cached(Slot[EmbeddingTally](("bertscore", "tally", namespace, id(scope))),
                            build)
