"""The judgments provider: what fills in the relevance judgments of records that carry none
(``judgments_from=``), for the retrieval metrics to read."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from rageval.core.metric import Batch, Metric
    from rageval.core.records import Record


class JudgmentsProvider(ABC):
    """Fills in the relevance judgments of records that carry none (``judgments_from=``).

    Registered by name (:func:`rageval.core.registry.register_judgments`); it grades with
    metrics of its own family (:meth:`metrics`). The orchestrator hands those metrics to their
    :class:`RunHooks` for the manifest and counts their libraries; their checks are the
    provider's own :meth:`check`, which knows which records it will grade. ``prepare`` is not
    called for them: :meth:`fill` does their whole work, window by window.
    """

    section: ClassVar[str]  # the manifest key of :meth:`fill`'s account

    @abstractmethod
    def metrics(self) -> list[Metric]:
        """The metrics it grades with."""

    @abstractmethod
    def check(self, records: Sequence[Record]) -> None:
        """Before any work: raise if the records cannot be graded as asked (running the
        :meth:`RunHooks.check` of its metrics over the records it will grade)."""

    @abstractmethod
    def fill(self, records: list[Record], run: Batch) -> list[Record]:
        """A window's records with judgments filled in; what it did is kept run-wide in
        ``run`` (:meth:`~rageval.core.metric.Batch.run_wide`) for :meth:`account`."""

    @abstractmethod
    def account(self, run: Batch, source: str) -> tuple[str, dict[str, Any]]:
        """Once every window is filled: the run's judgments source for signatures
        (``source`` is where the judgments it did not give came from) and its manifest
        section, from what :meth:`fill` kept in ``run``."""
