"""Where a run's records come from, decided once: a :class:`RecordSource`.

:func:`record_source` looks at what a run was given (records in memory, a records file, an
:class:`~rageval.inputs.spec.InputSpec`) once, checks a spec, and builds the one kind of
source that reads it: :class:`InMemory`, :class:`RecordsFile` (read window by window as the
run goes), :class:`LoadedInput` (ragas, TREC RAG, a TREC run with its texts, BEIR: read whole
by its reader) or :class:`Traces` (an OTLP/JSON file, a Phoenix project). Each knows how to
read its records (:meth:`RecordSource.read`), whether they can be read twice, its name in
messages and the manifest, and how to read them again later (the spec, when one named them).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.core.records import iter_windows
from rageval.inputs.spec import TRACE_KINDS, InputSpec

if TYPE_CHECKING:
    from rageval.core.progress import LoadProgress
    from rageval.core.records.judgments import Qrels
    from rageval.core.records.model import Record

__all__ = ["InMemory", "LoadedInput", "Reading", "RecordSource", "RecordsFile", "RecordsIn",
           "Traces", "record_source"]

#: What a run can be given as its records.
RecordsIn = Sequence["Record"] | str | os.PathLike[str] | InputSpec


@dataclass(frozen=True)
class Reading:
    """One read of a source: its windows of records and, when the input itself gives
    judgments (a BEIR directory's qrels, a references file's), those ``qrels``, the file they
    came from and what gave them (for messages: ``a BEIR directory``)."""

    windows: Iterator[list[Record]]
    qrels: Qrels | None = None
    qrels_source: str = ""
    given_by: str = ""


class RecordSource(ABC):
    """A run's records, as one kind of input reads them (see the module)."""

    #: How messages and the manifest name the records.
    name: str

    @abstractmethod
    def read(self, size: int, progress: LoadProgress | None = None) -> Reading:
        """The records in windows of at most ``size`` (an input read whole is one window);
        ``progress`` is told how far a file has been read."""

    @abstractmethod
    def rereadable(self) -> bool:
        """Whether the records can be read twice, as a pass over the run before it is scored
        needs (:class:`~rageval.core.metric.RunPass`); a run of a source read once that
        needs a pass is read as one window."""

    def manifest(self) -> dict[str, Any] | None:
        """How to read the records again (``rageval report``): the spec that named them,
        JSON-able; None for records given otherwise."""
        return None


class InMemory(RecordSource):
    """Records held in memory: one window, read as often as asked."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records
        self.name = "<memory>"

    def read(self, size: int, progress: LoadProgress | None = None) -> Reading:
        return Reading(iter([list(self.records)]))

    def rereadable(self) -> bool:
        return True


class RecordsFile(RecordSource):
    """A records file in rageval's own format, read ``size`` records at a time as the run
    goes, with ``format`` and ``max_line_bytes``. A regular file reads twice; a pipe (standard
    input) reads once."""

    def __init__(self, path: str | os.PathLike[str], format: str | None = None,
                 max_line_bytes: int | None = None, spec: InputSpec | None = None) -> None:
        self.path = path
        self.format = format
        self.max_line_bytes = max_line_bytes
        self.spec = spec
        self.name = str(Path(path))

    def read(self, size: int, progress: LoadProgress | None = None) -> Reading:
        return Reading(iter_windows(self.path, size, format=self.format,
                                    max_line_bytes=self.max_line_bytes, progress=progress))

    def rereadable(self) -> bool:
        return Path(self.path).is_file()

    def manifest(self) -> dict[str, Any] | None:
        return None if self.spec is None else self.spec.to_manifest()


class LoadedInput(RecordSource):
    """An input that its reader loads whole (:func:`~rageval.inputs.load.load`): ragas-style
    columns, a TREC RAG run, a TREC run joined with its texts, a BEIR directory (whose qrels
    come beside the records), a records file with a field map or in Arrow. One window, held in
    memory, read again from its files when asked."""

    def __init__(self, spec: InputSpec) -> None:
        self.spec = spec
        self.name = os.fspath((spec.run if spec.run is not None else spec.records) or "")

    def read(self, size: int, progress: LoadProgress | None = None) -> Reading:
        from rageval.inputs.load import load

        loaded = load(self.spec)
        return Reading(iter([loaded.records]), loaded.qrels, loaded.qrels_path or "<qrels>",
                       "a BEIR directory")

    def rereadable(self) -> bool:
        return True

    def manifest(self) -> dict[str, Any] | None:
        return self.spec.to_manifest()


class Traces(RecordSource):
    """Traces, OpenInference (from an OTLP/JSON file or a Phoenix project) or GenAI (a file)
    (:mod:`rageval.inputs.traces`), joined with the spec's references file. Read once: a
    trace server's may change between reads."""

    def __init__(self, spec: InputSpec) -> None:
        from rageval.inputs.traces import trace_source

        self.spec = spec
        self.name = trace_source(spec)

    def read(self, size: int, progress: LoadProgress | None = None) -> Reading:
        from rageval.inputs.traces import references_of, trace_windows

        join = references_of(self.spec)
        windows = trace_windows(self.spec, size, progress, join=join)
        if join is None or join.qrels is None:
            return Reading(windows)
        return Reading(windows, join.qrels, str(self.spec.references), "a references file")

    def rereadable(self) -> bool:
        return False

    def manifest(self) -> dict[str, Any] | None:
        return self.spec.to_manifest()


def record_source(records: RecordsIn, *, format: str | None = None,
                  max_line_bytes: int | None = None) -> RecordSource:
    """The source that reads ``records``: a list, a records file (read with ``format`` and
    ``max_line_bytes``) or a spec, checked here (:meth:`InputSpec.reader`), whose own format
    and line limit win over those two."""
    if isinstance(records, InputSpec):
        spec = replace(records, format=records.format or format,
                       max_line_bytes=(records.max_line_bytes
                                       if records.max_line_bytes is not None
                                       else max_line_bytes))
        if spec.reader() in TRACE_KINDS:
            return Traces(spec)
        if spec.is_plain():
            return RecordsFile(spec.records or "", spec.format, spec.max_line_bytes, spec)
        return LoadedInput(spec)
    if isinstance(records, (str, os.PathLike)):
        return RecordsFile(records, format, max_line_bytes)
    return InMemory(records)
