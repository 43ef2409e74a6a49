"""Where a run's relevance judgments join its records, and what the run says about where they
came from.

Judgments come inline in the records, from qrels (``--qrels``, or a BEIR split's qrels file)
and, for records that still have none, from a judgments provider (``--judgments-from judge``).
Every one of them is joined here, by :func:`apply_judgments`, and :class:`JudgmentsJoin` keeps
the account the retrieval metrics sign with (``judgments:qrels``, ``mixed``, ``judge/...``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

from rageval.core.errors import InputError
from rageval.core.records.model import FieldError, Record, validate_judgments, with_judgments

__all__ = ["CheckedQrels", "JoinedQrels", "JudgmentsJoin", "Qrels", "apply_judgments"]

#: Judgments by record id, then document id: ``{"q1": {"d3": 2, "d7": 0}}``.
Qrels = Mapping[str, Mapping[str, int]]


class CheckedQrels(dict[str, Mapping[str, int]]):
    """Qrels whose grades were already read as records' judgments (each value a copy of what
    :func:`~rageval.core.records.model.validate_judgments` returned): joined without checking
    them a second time. A value held as a read-only view (``MappingProxyType``, as a reader
    of references keeps it) is given to each record as it is; any other is copied first, so
    that no later change to the qrels reaches a record."""


class JoinedQrels(CheckedQrels):
    """Checked qrels that the records' reader joins itself, as it builds each record (a
    references file's judgments, joined to the trace records it gives): every record whose id
    they hold comes with their grades, so :class:`JudgmentsJoin` counts what they matched,
    for the run's account, and builds no record a second time."""


def apply_judgments(
    records: Iterable[Record],
    judgments: Qrels,
    *,
    source: str,
    records_source: str | None = None,
) -> list[Record]:
    """Return the records with judgments filled in from a qrels mapping (record id -> doc id
    -> grade) read from ``source``.

    Records without an entry keep their judgments. A record that has inline judgments *and*
    an entry in ``judgments`` is an :class:`InputError`: one of the two sources would be lost.
    ``records_source`` (the records file) is named in that error when given.
    """
    out: list[Record] = []
    inline_source = records_source if records_source is not None else "the records"
    checked = isinstance(judgments, CheckedQrels)
    for record in records:
        qrels = judgments.get(record.id)
        if qrels is None:
            out.append(record)
            continue
        if record.judgments is not None:
            raise InputError(
                f"record {record.id!r} has inline judgments in {inline_source} and judgments "
                f"in {source}; give judgments in one place only",
                path=source,
                field="judgments",
            )
        out.append(with_judgments(record, qrels) if checked
                   else _with_judgments(record, qrels, source))
    return out


def _with_judgments(record: Record, qrels: Mapping[str, int], source: str) -> Record:
    try:
        grades = validate_judgments(qrels, f"judgments.{record.id}")
    except FieldError as error:
        raise InputError(error.message, path=source, field=error.field) from None
    return dataclasses.replace(record, judgments=grades)


class JudgmentsJoin:
    """Fills a run's records with the judgments of its qrels as they are read, and says where
    the run's judgments came from once they have all been seen.

    ``qrels`` come from ``qrels_source`` (a path, or a label for a mapping); ``records_source``
    is named when a record also has judgments of its own.
    """

    def __init__(self, qrels: Qrels | None = None, *, qrels_source: str = "<qrels mapping>",
                 records_source: str = "<memory>") -> None:
        self.qrels = qrels
        self.qrels_source = qrels_source
        self.records_source = records_source
        self._matched = 0
        self._inline = 0
        self._provided: str | None = None

    def fill(self, records: list[Record]) -> list[Record]:
        """The records with the qrels' judgments, counting what they matched."""
        qrels = self.qrels
        if qrels is None:
            return records
        if isinstance(qrels, JoinedQrels):  # joined as they were built: counted only
            matched = sum(1 for r in records if r.id in qrels)
            self._matched += matched
            self._inline += sum(1 for r in records if r.judgments is not None) - matched
            return records
        self._matched += sum(1 for r in records if r.id in qrels)
        self._inline += sum(1 for r in records if r.judgments is not None)
        return apply_judgments(records, self.qrels, source=self.qrels_source,
                               records_source=self.records_source)

    def filled(self, windows: Iterator[list[Record]]) -> Iterator[list[Record]]:
        """Each window filled as it is read."""
        return windows if self.qrels is None else (self.fill(w) for w in windows)

    def provided(self, source: str) -> None:
        """A judgments provider graded the records left without judgments: ``source`` is the
        label it signs with, built on :meth:`source` (``qrels+judge/...``)."""
        self._provided = source

    def source(self) -> str:
        """Where the judgments came from, once every record was filled: ``inline``, ``qrels``,
        ``mixed`` (both), or the provider's label. Qrels that matched no record are an error."""
        if self._provided is not None:
            return self._provided
        if self.qrels is None:
            return "inline"
        if self._matched == 0:
            raise InputError("no query id of the qrels matches a record id",
                             path=self.qrels_source)
        return "qrels" if self._inline == 0 else "mixed"
