"""One batch's per-record results, kept by column: what the sinks write or hold.

A batch's scores come out of the metrics as one array per output; a block keeps them that way
and builds what a sink needs from the columns: :class:`~rageval.core.results.RecordResult`
rows for a run held in memory, or the lines of ``records.jsonl`` for one written as it goes.
The lines are exactly those of ``json`` encoding each row on its own (one encoder, no ASCII
escaping, no NaN), built faster: each output's values are encoded as one JSON list and split,
and every line is one format of a template made from the output names.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rageval.core.metric import Metric, MetricResult
from rageval.core.outputs.surrogates import LONE_SURROGATES, repaired_outputs
from rageval.core.records import Record
from rageval.core.results import RecordResult

__all__ = ["ResultBlock", "result_block"]


# json.dumps with options builds a new encoder per call; one encoder serves every line.
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_EMPTY = "{}"


@dataclass(frozen=True)
class ResultBlock:
    """Per-record results of one batch: ids, the outputs' values by column (Python floats, None
    for unscored), and each record's errors and details (None when it has none)."""

    ids: list[str]
    names: list[str]
    columns: list[list[float | None]]
    errors: list[dict[str, str] | None]
    details: list[dict[str, Any] | None]
    # Per record, its conversation's id and its turn (None for a record on its own, no turn
    # for a conversation's own line); None when no record of the block is in a conversation.
    threads: list[tuple[str, int | None] | None] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self) -> list[RecordResult]:
        """One :class:`~rageval.core.results.RecordResult` per record (a run held in memory)."""
        names = self.names
        values = zip(*self.columns, strict=True) if self.columns else [()] * len(self.ids)
        threads = self.threads or [None] * len(self.ids)
        return [RecordResult(rid, dict(zip(names, row, strict=True)), errors or {}, details or {},
                             *(thread or (None, None)))
                for rid, row, errors, details, thread in zip(self.ids, values, self.errors,
                                                             self.details, threads, strict=True)]

    def utf8_lines(self) -> bytes:
        """:meth:`json_lines` encoded as UTF-8, after :meth:`repaired` when some text of the
        block holds a lone surrogate (which UTF-8 cannot encode)."""
        try:
            return self.json_lines().encode("utf-8")
        except UnicodeEncodeError:
            return self.repaired().json_lines().encode("utf-8")

    def valid_unicode(self) -> ResultBlock:
        """The block itself, or :meth:`repaired` when some of its text holds a lone
        surrogate."""
        try:
            _ENCODE([self.errors, self.details]).encode("utf-8")
        except UnicodeEncodeError:
            return self.repaired()
        return self

    def repaired(self) -> ResultBlock:
        """The block with every lone surrogate in its records' errors and details replaced
        with U+FFFD, each such record's details saying where (:data:`LONE_SURROGATES`). Ids
        never need it: a reader refuses an id that is not valid Unicode."""
        pairs = [repaired_outputs(error, detail)
                 for error, detail in zip(self.errors, self.details, strict=True)]
        return dataclasses.replace(self, errors=[error for error, _ in pairs],
                                   details=[detail for _, detail in pairs])

    def json_lines(self) -> str:
        """The block's lines of ``records.jsonl``: ``{"id", "scores", "details", "errors"}``
        per record, each ended by a newline."""
        if any(len(column) != len(self.ids) for column in self.columns):
            raise ValueError("every column of a result block holds one value per record")
        if not self.ids:
            return ""
        if len(set(self.names)) != len(self.names):
            # Two outputs of one name (plugin metrics may clash): a row keeps the last value
            # at the first one's place, as a dict does.
            return "".join(_line(row) for row in self.rows())
        keys = [_ENCODE(name).replace("%", "%%") for name in self.names]
        template = ('{"id": %s%s, "scores": {' + ", ".join(f"{k}: %s" for k in keys)
                    + '}, "details": %s, "errors": %s}\n')
        # A column of floats and None encodes as "[v, v, ...]": no value holds ", ".
        encoded = [_ENCODE(column)[1:-1].split(", ") for column in self.columns]
        ids = [_ENCODE(rid) for rid in self.ids]
        threads = ([_thread(t) for t in self.threads] if self.threads
                   else [""] * len(ids))
        details = [_EMPTY if not d else _ENCODE(d) for d in self.details]
        errors = [_EMPTY if not e else _ENCODE(e) for e in self.errors]
        return "".join([template % values
                        for values in zip(ids, threads, *encoded, details, errors,
                                          strict=True)])


def result_block(records: Sequence[Record],
                 per_metric: dict[Metric, MetricResult]) -> ResultBlock:
    """The per-record results of one batch scored by ``per_metric``."""
    names = [name for result in per_metric.values() for name in result.values]
    columns = [_column(values) for result in per_metric.values()
               for values in result.values.values()]
    count = len(records)
    errors: list[dict[str, str] | None] = [None] * count
    details: list[dict[str, Any] | None] = [None] * count
    for metric, result in per_metric.items():
        for i, reason in enumerate(result.reasons):
            if reason is not None:
                _entry(errors, i)[str(metric)] = reason
    for metric, result in per_metric.items():
        if result.details is None:
            continue
        key = metric.details_key()
        for i, detail in enumerate(result.details):
            if detail is not None:
                # Metrics that share one analysis (claim-level judging) share one key.
                _entry(details, i).setdefault(key, detail)
    for i, r in enumerate(records):
        if LONE_SURROGATES in r.extra:  # texts of the record repaired when it was read
            _entry(details, i)[LONE_SURROGATES] = list(r.extra[LONE_SURROGATES])
    threads = None
    if any(r.conversation is not None for r in records):
        threads = [None if r.conversation is None else (r.conversation.id, r.turn or None)
                   for r in records]
    return ResultBlock([r.id for r in records], names, columns, errors, details, threads)


def _thread(thread: tuple[str, int | None] | None) -> str:
    """A line's conversation and turn, after its id ("" for a record on its own; no turn on
    a conversation's own line)."""
    if thread is None:
        return ""
    turn = "" if thread[1] is None else f', "turn": {thread[1]}'
    return f', "conversation": {_ENCODE(thread[0])}{turn}'


def _line(row: RecordResult) -> str:
    """One row encoded on its own: what the template builds, for any block."""
    thread: dict[str, Any] = {}
    if row.conversation is not None:
        thread["conversation"] = row.conversation
        if row.turn is not None:
            thread["turn"] = row.turn
    return _ENCODE({"id": row.id, **thread, "scores": row.scores, "details": row.details,
                    "errors": row.errors}) + "\n"


def _entry(per_record: list[dict[str, Any] | None], i: int) -> dict[str, Any]:
    found = per_record[i]
    if found is None:
        found = per_record[i] = {}
    return found


def _column(values: np.ndarray) -> list[float | None]:
    """An output's values as Python floats, None where unscored (NaN)."""
    floats = values.astype(np.float64, copy=False)
    column: list[float | None] = floats.tolist()
    if np.isnan(floats).any():
        column = [None if v != v else v for v in column]
    return column
