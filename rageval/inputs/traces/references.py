"""References and judgments joined to records built from traces, by record id.

Traces hold what a pipeline did, not what it should have answered: the reference answers and
the relevance judgments come from a file beside them, a records file (any format rageval reads)
whose records carry an ``id`` and a ``reference`` and/or ``judgments``. They join the trace
records whose id is the same (``--map id=metadata.qid`` gives trace records the ids the file
uses). A field the trace record already has from its own spans (a mapped ``reference``) and the
file gives too is an error rather than a silent choice.
"""

from __future__ import annotations

from typing import Any

from rageval.core.errors import InputError
from rageval.core.records import iter_records

__all__ = ["ReferencesJoin"]


class ReferencesJoin:
    """The references file, read whole (ids and the two fields, nothing else), joined into
    record objects one by one (:meth:`fill`); :meth:`finish` refuses a file none of whose ids
    matched a record."""

    def __init__(self, path: str, *, format: str | None = None,
                 max_line_bytes: int | None = None) -> None:
        self.path = path
        self._entries: dict[str, dict[str, Any]] = {}
        for record in iter_records(path, format=format, max_line_bytes=max_line_bytes):
            entry: dict[str, Any] = {}
            if record.references:
                refs = list(record.references)
                entry["reference"] = refs[0] if len(refs) == 1 else refs
            if record.judgments is not None:
                entry["judgments"] = dict(record.judgments)
            self._entries[record.id] = entry
        self.matched = 0
        self._example: str | None = None

    def fill(self, item: dict[str, Any], source: str, line: int) -> dict[str, Any]:
        """``item`` (a record object) with the file's fields for its id."""
        record_id = str(item["id"])
        self._example = self._example or record_id
        entry = self._entries.get(record_id)
        if entry is None:
            return item
        self.matched += 1
        for field, value in entry.items():
            if item.get(field) is not None:
                raise InputError(f"record {record_id!r} has a {field} from its trace and from "
                                 f"{self.path}: give it in one place", path=source,
                                 line=line or None, field=field)
            item[field] = value
        return item

    def finish(self) -> None:
        """Refuse a references file that matched no record (the ids are not the same kind)."""
        if self.matched or not self._entries:
            return
        theirs = next(iter(self._entries))
        raise InputError(f"no record id of this file matched a trace record (the file has ids "
                         f"like {theirs!r}, the traces {self._example!r}): map the traces' ids "
                         "with --map id=ATTRIBUTE (e.g. id=metadata.qid)", path=self.path)
