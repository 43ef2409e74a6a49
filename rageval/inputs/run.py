"""What a run scores: :class:`RunInputs`, built once from the records (a list, a records file,
or an :class:`InputSpec`), the qrels and the judgments provider, and handed to the
orchestrator whole, which reads the records from it window by window."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.core.errors import UsageError
from rageval.core.records import iter_windows
from rageval.core.records.judgments import JudgmentsJoin, Qrels
from rageval.inputs.spec import InputSpec

if TYPE_CHECKING:
    from rageval.core.progress import LoadProgress
    from rageval.core.providers import JudgmentsProvider
    from rageval.core.records.model import Record

__all__ = ["RecordsIn", "RunInputs"]

#: What a run can be given as its records.
RecordsIn = Sequence["Record"] | str | os.PathLike[str] | InputSpec


class RunInputs:
    """A run's records and everything that joins them, read when the run asks.

    ``records`` is a list of records, a records file (read ``window`` records at a time, with
    ``format`` and ``max_line_bytes``; ``progress`` is told how far), or an
    :class:`InputSpec`, whose own format and line limit win over those two. ``qrels`` (a TREC
    qrels path, or a mapping ``{record_id: {doc_id: grade}}``) fill the records' judgments as
    they are read, in :attr:`judgments`, where every judgment joins the records and which says
    where they came from; ``provider`` grades the records still without any
    (``judgments_from``). ``human`` names the records' field of human labels that calibrate
    the judge means. :attr:`source` names the records in the manifest, and
    :attr:`manifest` says how to read them again when they came from a spec.
    """

    def __init__(self, records: RecordsIn, *,
                 qrels: str | os.PathLike[str] | Qrels | None = None,
                 provider: JudgmentsProvider | None = None, human: str | None = None,
                 format: str | None = None,
                 max_line_bytes: int | None = None, window: int = 10_000,
                 progress: LoadProgress | None = None) -> None:
        self.manifest: dict[str, Any] | None = None
        if isinstance(records, InputSpec):
            records = replace(records, format=records.format or format,
                              max_line_bytes=(records.max_line_bytes
                                              if records.max_line_bytes is not None
                                              else max_line_bytes))
            self.manifest = records.to_manifest()
            format, max_line_bytes = records.format, records.max_line_bytes
        self.records = records
        self.format = format
        self.max_line_bytes = max_line_bytes
        self.window = window
        self.progress = progress
        self.provider = provider
        if human is not None and (not isinstance(human, str) or not human.strip()):
            raise UsageError(f"human must name a field of the records, got {human!r}")
        self.human = human
        self.source = _source(records)
        self.judgments = _join(qrels, self.source)

    def rereadable(self) -> bool:
        """Whether the records can be read twice, as a pass over the run before it is scored
        needs (:class:`~rageval.core.metric.RunPass`): records in memory, loaded whole by an
        input format, or in a regular file. A pipe (standard input) reads once, and so do
        traces (a trace server's may change between reads): a run of them that needs a pass
        is read as one window."""
        records = self.records
        if isinstance(records, InputSpec) and records.reader() == "openinference":
            return False
        if isinstance(records, InputSpec) and not records.is_plain():
            return True  # loaded whole: one window, held in memory
        if isinstance(records, InputSpec):
            records = records.records or ""
        return not isinstance(records, (str, os.PathLike)) or Path(records).is_file()

    def windows(self, again: bool = False) -> Iterator[list[Record]]:
        """The records, each window filled with its qrels' judgments as it is read: one
        window for records held in memory or read by an input format (read and checked
        here), windows of a records file read as the run goes otherwise. ``again``: a records
        file's second read, for a pass over the run (which tells no progress)."""
        records = self.records
        if isinstance(records, InputSpec) and records.reader() == "openinference":
            from rageval.inputs.traces import references_of, trace_windows

            join = references_of(records)
            if join is not None and join.qrels is not None:
                self._join_qrels(join.qrels, str(records.references), "a references file")
            return self.judgments.filled(trace_windows(records, self.window, self.progress,
                                                       join=join))
        if isinstance(records, InputSpec) and not records.is_plain():
            from rageval.inputs.load import load

            loaded = load(records)
            if loaded.qrels is not None:  # a BEIR directory's
                self._join_qrels(loaded.qrels, loaded.qrels_path or "<qrels>",
                                 "a BEIR directory")
            return self.judgments.filled(iter([loaded.records]))
        if isinstance(records, InputSpec):  # a records file read as rageval's own
            records = records.records or ""
        if not isinstance(records, (str, os.PathLike)):
            return self.judgments.filled(iter([list(records)]))
        windows = iter_windows(records, self.window, format=self.format,
                               max_line_bytes=self.max_line_bytes,
                               progress=None if again else self.progress)
        # The run's join counts what matched once; a pass's read counts on a copy.
        return (copy.copy(self.judgments) if again else self.judgments).filled(windows)

    def _join_qrels(self, qrels: Qrels, source: str, given_by: str) -> None:
        """Join the qrels the input itself gives (a BEIR directory's, a references file's
        judgments) where every judgment joins; refused beside the run's own qrels."""
        if self.judgments.qrels is not None:
            raise UsageError(f"{given_by} gives the qrels: give qrels or {given_by}'s, not "
                             "both")
        self.judgments = JudgmentsJoin(qrels, records_source=self.source, qrels_source=source)


def _source(records: RecordsIn) -> str:
    """Where the records come from, as the manifest names it."""
    if isinstance(records, InputSpec) and records.is_plain():
        return str(Path(records.records or ""))
    if isinstance(records, InputSpec) and (records.phoenix is not None
                                           or records.kind == "openinference"):
        from rageval.inputs.traces import trace_source

        return trace_source(records)
    if isinstance(records, InputSpec):
        named = records.run if records.run is not None else records.records
        return os.fspath(named or "")
    if isinstance(records, (str, os.PathLike)):
        return str(Path(records))
    return "<memory>"


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
