"""Digests of the data a run scored, for telling whether two runs scored the same evaluation set.

:class:`DataDigest` keeps, as a run's windows pass, one digest of the record ids and one per
field the metrics read (``query``, ``contexts``, ``answer``, ``reference``, ``judgments``): each
the sum, modulo 2**128, of a 128-bit BLAKE2b digest per record (the field's digest covers the
record's id too, so that two records swapping answers change it). A sum does not depend on the
order of the records, nor on how they were split into windows or batches, and holds in a few
bytes whatever the record count.

Two runs of a regression gate score two systems, so their answers and contexts are expected to
differ; the evaluation set is what must not: the ids, the queries asked, the references and the
judgments given, and the judge that grades. Each output's digest (the manifest's
``data.metrics``) covers exactly those of them it reads (:data:`SET_FIELDS`), with the judge's
configuration for judge outputs; the digests of the answers and contexts stay in
``data.fields``, saying whether the systems' outputs changed at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rageval.core.records.model import Record

__all__ = ["DIGEST_FIELDS", "SET_FIELDS", "DataDigest", "metric_digest"]

#: The record fields a metric can read, in the order their digests are combined.
DIGEST_FIELDS: tuple[str, ...] = ("query", "contexts", "answer", "reference", "judgments",
                                  "tool_calls", "reference_tool_calls")
#: The fields of the evaluation set (not the outputs of the system scored).
SET_FIELDS: tuple[str, ...] = ("query", "reference", "judgments", "reference_tool_calls")
_MOD = 1 << 128
_SEP = b"\x1f"


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "little")


def _text(value: str | None) -> bytes:
    return b"\x00" if value is None else b"\x01" + value.encode("utf-8", "surrogatepass")


def _encoded(record: Record, field: str) -> bytes:
    """The bytes of one field of a record, unambiguous: every text is preceded by its length."""
    if field == "query":
        return _text(record.query)
    if field == "answer":
        return _text(record.answer)
    if field == "contexts":
        text = "".join([f"{len(c.id)}:{c.id}{len(c.text)}:{c.text}{c.score!r};"
                        for c in record.contexts])
    elif field == "reference":
        text = "".join([f"{len(r)}:{r}" for r in record.references])
    elif field in ("tool_calls", "reference_tool_calls"):
        calls = getattr(record, field)
        if calls is None:
            return b"\x00"
        text = json.dumps([call.to_dict() for call in calls], sort_keys=True,
                          ensure_ascii=False)
    elif record.judgments is None:
        return b"\x00"
    else:
        text = "".join([f"{len(d)}:{d}{g};" for d, g in sorted(record.judgments.items())])
    return b"\x01" + text.encode("utf-8", "surrogatepass")


class DataDigest:
    """The digests of the records of a run as they pass (:meth:`add`), for the fields
    ``fields`` (those of :data:`DIGEST_FIELDS` the run's metrics read)."""

    def __init__(self, fields: Iterable[str]) -> None:
        wanted = set(fields)
        self.fields = [f for f in DIGEST_FIELDS if f in wanted]
        self.count = 0
        self._ids = 0
        self._sums = dict.fromkeys(self.fields, 0)

    def add(self, records: Sequence[Record]) -> None:
        ids, sums = self._ids, self._sums
        for record in records:
            key = record.id.encode("utf-8", "surrogatepass")
            ids += _digest(key)
            prefix = len(key).to_bytes(4, "little") + key + _SEP
            for field in self.fields:
                sums[field] += _digest(prefix + _encoded(record, field))
        self._ids = ids % _MOD
        for field in self.fields:
            sums[field] %= _MOD
        self.count += len(records)

    def manifest(self, needs: Mapping[str, Iterable[str]],
                 grading: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The manifest's ``data`` section: the record count, the ids' and each field's
        digest, and each output's evaluation set (``needs``: output -> the fields it reads).
        ``grading`` gives the graders' outputs' configuration (a judge's signature without
        versions, :meth:`~rageval.core.metric.Metric.grading`): it enters their digests, and
        the section's ``judge`` digest is that of them all."""
        judge = grading or {}
        fields = {field: f"{value:032x}" for field, value in self._sums.items()}
        ids = f"{self._ids:032x}"
        out: dict[str, Any] = {
            "records": self.count, "ids": ids, "fields": fields,
            "metrics": {name: metric_digest(ids, fields, wanted, judge.get(name, ""))
                        for name, wanted in needs.items()}}
        if judge:
            configuration = "\n".join(sorted(set(judge.values())))
            out["judge"] = hashlib.blake2b(configuration.encode("utf-8"),
                                           digest_size=16).hexdigest()
        return out


def metric_digest(ids: str, fields: Mapping[str, str], wanted: Iterable[str],
                  configuration: str = "") -> str:
    """The digest of the ids, of the evaluation-set fields among ``wanted`` (one output's) and
    of its judge ``configuration`` (empty for other metrics), from their own."""
    chosen = set(wanted) & set(SET_FIELDS)
    parts = [ids, *(f"{f}={fields[f]}" for f in DIGEST_FIELDS if f in chosen and f in fields)]
    if configuration:
        parts.append(configuration)
    return hashlib.blake2b("|".join(parts).encode("utf-8"), digest_size=16).hexdigest()
