"""Results of a scoring run and the output contract (``records.jsonl`` + ``summary.json``).

``DIR/records.jsonl``: one line per record::

    {"id": ..., "scores": {name: value-or-null}, "details": {...}, "errors": {name: reason}}

``DIR/summary.json``::

    {"metrics": {name: {"value", "n", "unscored", "ci95": [lo, hi], "signature", ...}},
     "manifest": {...}}

Unscored values are ``null`` in files and NaN in memory, always with a reason.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class MetricSummary:
    """Aggregate of one output name over the run."""

    value: float | None  # mean of scored values, or the corpus-level figure
    n: int  # records scored
    unscored: int  # records left unscored (reasons counted in ``reasons``)
    ci95: tuple[float, float] | None
    signature: str
    reasons: dict[str, int] = field(default_factory=dict)
    aggregate: str = "mean"  # "mean" or "corpus"
    short_signature: str = ""  # abbreviated keys, for tables; summary.json keeps the long form
    in_table: bool = True  # False for components the terminal table leaves out by default

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "value": _json_float(self.value),
            "n": self.n,
            "unscored": self.unscored,
            "ci95": None if self.ci95 is None else [_json_float(v) for v in self.ci95],
            "signature": self.signature,
            "aggregate": self.aggregate,
        }
        if self.reasons:
            out["unscored_reasons"] = dict(self.reasons)
        return out


@dataclass(frozen=True)
class RecordResult:
    id: str
    scores: dict[str, float | None]
    errors: dict[str, str]
    details: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scores": {k: _json_float(v) for k, v in self.scores.items()},
            "details": self.details,
            "errors": self.errors,
        }


@dataclass(frozen=True)
class Results:
    """Everything a run produced: per-record values, the summary and the manifest."""

    records: list[RecordResult]
    summary: dict[str, MetricSummary]
    manifest: dict[str, Any]

    def __iter__(self) -> Iterator[RecordResult]:
        return iter(self.records)

    def summary_json(self) -> dict[str, Any]:
        return {
            "metrics": {name: s.to_json() for name, s in self.summary.items()},
            "manifest": self.manifest,
        }

    def write(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write ``records.jsonl`` and ``summary.json`` into ``out_dir`` (created if needed).

        Each file is written to a temporary name and renamed, so a crash never leaves a torn file.
        """
        directory = Path(out_dir)
        directory.mkdir(parents=True, exist_ok=True)
        lines = (json.dumps(r.to_json(), ensure_ascii=False, allow_nan=False) for r in self.records)
        _atomic_write(directory / "records.jsonl", "".join(line + "\n" for line in lines))
        summary = json.dumps(self.summary_json(), indent=2, ensure_ascii=False, allow_nan=False)
        _atomic_write(directory / "summary.json", summary + "\n")
        return directory


def _json_float(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
