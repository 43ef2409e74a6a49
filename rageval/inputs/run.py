"""What a run scores: :class:`RunInputs`, built once from its records (read by the one
:class:`~rageval.inputs.source.RecordSource` that fits them), the qrels and the judgments
provider, and handed to the orchestrator whole, which reads the records from it window by
window."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rageval.core.errors import UsageError
from rageval.core.records.judgments import JudgmentsJoin, Qrels
from rageval.inputs.source import Reading, RecordsIn, RecordSource, record_source

if TYPE_CHECKING:
    from rageval.core.metric import Batch
    from rageval.core.progress import LoadProgress
    from rageval.core.providers import JudgmentsProvider
    from rageval.core.records.model import Record

__all__ = ["RecordsIn", "RunInputs"]


class RunInputs:
    """A run's records and everything that joins them, read when the run asks.

    ``records`` is a list of records, a records file (read ``window`` records at a time, with
    ``format`` and ``max_line_bytes``; ``progress`` is told how far), or an
    :class:`~rageval.inputs.spec.InputSpec`, checked here, whose own format and line limit win
    over those two: :attr:`records` is the source that reads them
    (:func:`~rageval.inputs.source.record_source`). ``qrels`` (a TREC qrels path, or a mapping
    ``{record_id: {doc_id: grade}}``) fill the records' judgments as they are read, in
    :attr:`judgments`, where every judgment joins the records and which says where they came
    from; ``provider`` grades the records still without any (``judgments_from``:
    :meth:`fill_judgments`, accounted for by :meth:`provided`). ``human`` names the records'
    field of human labels that calibrate the judge means; ``human_labels`` a labels file
    (``rageval annotate``'s) that does so instead, joined by record id (``allow_unknown_labels``:
    labels of ids the run lacks are counted and ignored rather than refused).
    :attr:`source` names the records in the manifest, and :attr:`manifest` says how to read them
    again when they came from a spec.
    """

    def __init__(self, records: RecordsIn, *,
                 qrels: str | os.PathLike[str] | Qrels | None = None,
                 provider: JudgmentsProvider | None = None, human: str | None = None,
                 format: str | None = None,
                 max_line_bytes: int | None = None, window: int = 10_000,
                 progress: LoadProgress | None = None,
                 human_labels: str | os.PathLike[str] | None = None,
                 allow_unknown_labels: bool = False) -> None:
        if human is not None and (not isinstance(human, str) or not human.strip()):
            raise UsageError(f"human must name a field of the records, got {human!r}")
        if human is not None and human_labels is not None:
            raise UsageError(f"--human {human} and --human-labels {os.fspath(human_labels)} both "
                             "give human labels: give one (a labels file holds labels of any "
                             "number of annotators)")
        self.records: RecordSource = record_source(records, format=format,
                                                   max_line_bytes=max_line_bytes)
        self.window = window
        self.progress = progress
        self.provider = provider
        self.human = human
        self.human_labels = None if human_labels is None else os.fspath(human_labels)
        self.allow_unknown_labels = allow_unknown_labels
        self.source = self.records.name
        self.manifest = self.records.manifest()
        self.judgments = _join(qrels, self.source)

    def windows(self, again: bool = False) -> Iterator[list[Record]]:
        """The records, each window filled with its judgments as it is read (the qrels', and
        those the input itself gives). ``again``: a second read, for a pass over the run
        (which tells no progress and counts on a copy of the join what matched)."""
        reading = self.records.read(self.window, None if again else self.progress)
        if again:
            return copy.copy(self.judgments).filled(reading.windows)
        if reading.qrels is not None:
            self._join_qrels(reading)
        return self.judgments.filled(reading.windows)

    def fill_judgments(self, batch: Batch) -> None:
        """The batch's records with the judgments the provider gives those without any,
        checked first (``provider.check``); what it did is kept in the batch's run-wide
        objects, for :meth:`provided`."""
        provider = self.provider
        if provider is None:
            return
        provider.check(batch.records)
        batch.records = provider.fill(batch.records, batch)

    def provided(self, batch: Batch) -> dict[str, Any]:
        """Once every record is filled (``batch``: the run's one window, or its run-wide
        objects): where the run's judgments came from, the provider's label built on the
        qrels' or the records' own; returns the provider's manifest section, by its key."""
        provider = self.provider
        if provider is None:
            return {}
        source, section = provider.account(batch, self.judgments.source())
        self.judgments.provided(source)
        return {provider.section: section}

    def _join_qrels(self, reading: Reading) -> None:
        """Join the qrels the input itself gives (a BEIR directory's, a references file's
        judgments) where every judgment joins; refused beside the run's own qrels."""
        given_by = reading.given_by
        if self.judgments.qrels is not None:
            raise UsageError(f"{given_by} gives the qrels: give qrels or {given_by}'s, not "
                             "both")
        self.judgments = JudgmentsJoin(reading.qrels, records_source=self.source,
                                       qrels_source=reading.qrels_source)


def _join(qrels: str | os.PathLike[str] | Qrels | None, records_source: str) -> JudgmentsJoin:
    """The run's judgments join, with the qrels given (read here when a path)."""
    if isinstance(qrels, Mapping):
        return JudgmentsJoin(qrels, records_source=records_source)
    if qrels is None:
        return JudgmentsJoin(records_source=records_source)
    from rageval.retrieval.trec import read_qrels

    path = os.fspath(qrels)
    return JudgmentsJoin(read_qrels(path).to_dict(), qrels_source=path,
                         records_source=records_source)
