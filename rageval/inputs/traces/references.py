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

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rageval.core.errors import InputError
from rageval.core.records import record_objects
from rageval.core.records.judgments import JoinedQrels
from rageval.core.records.model import plain_fields
from rageval.core.records.validation import validate_records

__all__ = ["ReferencesJoin"]


class ReferencesJoin:
    """The references file, read whole (ids and the two fields, nothing else): its references
    joined into record objects one by one (:meth:`fill`), its judgments as :attr:`qrels` (None
    when it has none), which the trace reader joins as it builds each record;
    :meth:`finish` refuses a file none of whose ids matched a record."""

    def __init__(self, path: str, *, max_line_bytes: int | None = None) -> None:
        self.path = path
        self._references: dict[str, Any] = {}  # id -> its reference(s), None when it has none
        # read as the records' judgments: checked once, here, and joined as records are built
        self._qrels = JoinedQrels()
        objects, unit = record_objects(path, max_line_bytes=max_line_bytes)
        for record in validate_records(objects, path, unit, plain=self._plain):
            refs = list(record.references)
            judgments = None if record.judgments is None else dict(record.judgments)
            self._keep(record.id, (refs[0] if len(refs) == 1 else refs) or None, judgments)
        self.qrels = self._qrels or None
        self.matched = 0
        self._example: str | None = None

    def _plain(self, item: Any) -> str | None:
        """The id of ``item`` when it holds only an id, a reference and judgments that its
        validation as a record would keep as they are (:func:`~rageval.core.records.model.
        plain_fields`), its fields kept; None for any other, validated as a record is."""
        if type(item) is not dict or not _PLAIN_KEYS.issuperset(item):
            return None
        get = item.get
        record_id, reference, judgments = get("id"), get("reference"), get("judgments")
        if not plain_fields(record_id, reference, judgments):
            return None
        # an empty reference is none, as a validated line's is; the judgments' dict was
        # decoded for this line and is held by nothing else
        self._keep(record_id, reference or None, judgments)
        return record_id

    def _keep(self, record_id: str, reference: Any, judgments: Mapping[str, int] | None) -> None:
        self._references[record_id] = reference
        if judgments is not None:  # read-only: records share it, none may change it
            self._qrels[record_id] = MappingProxyType(judgments)

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


# The fields of a references file's usual line, read without making a record of it; any
# other line is validated as a record object is.
_PLAIN_KEYS = frozenset({"id", "reference", "judgments"})
