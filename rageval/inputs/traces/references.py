"""References and judgments joined to records built from traces, by record id.

Traces hold what a pipeline did, not what it should have answered: the reference answers and
the relevance judgments come from a file beside them, a records file (any format rageval reads)
whose records carry an ``id`` and a ``reference`` and/or ``judgments``, joined to the trace
records whose id is the same (``--map id=metadata.qid`` gives trace records the ids the file
uses). The references join here; the judgments are handed over as qrels (:attr:`qrels`), to
join where every run's judgments join (:class:`~rageval.core.records.judgments.JudgmentsJoin`),
so that the run signs them as it signs ``--qrels``. A reference the trace record already has
from its own spans (a mapped ``reference``) and the file gives too is an error rather than a
silent choice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rageval.core.errors import InputError
from rageval.core.records import record_objects
from rageval.core.records.judgments import CheckedQrels
from rageval.core.records.model import FieldError, Record, checked_record, validate_judgments
from rageval.core.records.validation import validate_records

__all__ = ["ReferencesJoin"]


class ReferencesJoin:
    """The references file, read whole (ids and the two fields, nothing else): its references
    joined into record objects one by one (:meth:`fill`), its judgments as :attr:`qrels` (None
    when it has none); :meth:`finish` refuses a file none of whose ids matched a record."""

    def __init__(self, path: str, *, max_line_bytes: int | None = None) -> None:
        self.path = path
        self._references: dict[str, Any] = {}  # id -> its reference(s), None when it has none
        qrels = CheckedQrels()  # read as the records' judgments: checked once, here
        objects, unit = record_objects(path, max_line_bytes=max_line_bytes)
        for record in validate_records(_plain_first(objects), path, unit, built=True):
            refs = list(record.references)
            self._references[record.id] = (refs[0] if len(refs) == 1 else refs) or None
            if record.judgments is not None:
                qrels[record.id] = dict(record.judgments)
        self.qrels = qrels or None
        self.matched = 0
        self._example: str | None = None

    def fill(self, item: dict[str, Any], source: str, line: int) -> dict[str, Any]:
        """``item`` (a record object) with the file's reference for its id."""
        record_id = str(item["id"])
        self._example = self._example or record_id
        if record_id not in self._references:
            return item
        self.matched += 1
        reference = self._references[record_id]
        if reference is not None:
            if item.get("reference") is not None:
                raise InputError(f"record {record_id!r} has a reference from its trace and from "
                                 f"{self.path}: give it in one place", path=source,
                                 line=line or None, field="reference")
            item["reference"] = reference
        return item

    def finish(self) -> None:
        """Refuse a references file that matched no record (the ids are not the same kind)."""
        if self.matched or not self._references:
            return
        theirs = next(iter(self._references))
        raise InputError(f"no record id of this file matched a trace record (the file has ids "
                         f"like {theirs!r}, the traces {self._example!r}): map the traces' ids "
                         "with --map id=ATTRIBUTE (e.g. id=metadata.qid)", path=self.path)


# The fields of a references file's usual line, which it reads as records without walking
# their objects; any other line is validated as a record object is.
_PLAIN_KEYS = frozenset({"id", "reference", "judgments"})
_NO_EXTRA: dict[str, Any] = {}


def _plain_first(objects: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """``objects``, each holding only an id, a reference and judgments as the record it
    validates to (:func:`_plain_record`), the others as they are, for their validation."""
    for line, item in objects:
        yield line, _plain_record(item) or item


def _plain_record(item: Any) -> Record | None:
    """The record of ``item`` when it holds a string id, a reference that is one string or
    none, and judgments, and nothing else; None for any other (or a value its validation
    would refuse or repair, which then says what is wrong)."""
    if type(item) is not dict or not _PLAIN_KEYS.issuperset(item):
        return None
    record_id, reference = item.get("id"), item.get("reference")
    if type(record_id) is not str or (reference is not None and type(reference) is not str):
        return None
    try:
        judgments = validate_judgments(item.get("judgments"))
    except FieldError:
        return None
    return checked_record(record_id, None, (), None, () if reference is None else (reference,),
                          _NO_EXTRA, judgments)
