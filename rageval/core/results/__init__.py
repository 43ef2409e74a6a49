"""Results of a scoring run and the output contract (``records.jsonl`` + ``summary.json``).

``DIR/records.jsonl``: one line per record::

    {"id": ..., "scores": {name: value-or-null}, "details": {...}, "errors": {name: reason}}

``DIR/summary.json``::

    {"metrics": {name: {"value", "n", "unscored", "ci95": [lo, hi], "signature", ...}},
     "manifest": {...}}

Unscored values are ``null`` in files and NaN in memory, always with a reason. A value that
stands but should not be trusted blindly is flagged: its record's details list the flags'
names under ``"flags"`` (and why under ``"flag_reasons"``), and the summary counts the records
of each flag under ``"flagged"``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rageval.core.calibration import Calibration
from rageval.core.errors import InputError, UsageError
from rageval.core.outputs.run_directory import RunDirectory, identity
from rageval.core.outputs.surrogates import utf8_record_lines
from rageval.core.results.conversations import TurnRules, conversation_rows, write_conversations
from rageval.core.results.counts import count_of
from rageval.core.results.frames import calibration_columns, frame
from rageval.core.scale import Scale, scale_from_json

# summary.json holds the SHA-256 of the records.jsonl written with it: a pair that was not
# written together (a directory written file by file, killed in between, or edited by hand)
# must not pass for a whole run.
RECORDS_DIGEST = "records_sha256"


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
    # Records whose value stands but is flagged (a record's details' "flags"), by flag.
    flagged: dict[str, int] = field(default_factory=dict)
    # The mean calibrated by human labels (a run given them: --human FIELD).
    calibrated: Calibration | None = None
    # Figures beside the value, by key (a judge's "stability" over its samples).
    figures: dict[str, Any] = field(default_factory=dict)
    # How the CI was drawn: "records" (the bootstrap of records), "judge-noise" (records,
    # then each record's judge samples), "conversations" (of conversations), or "poisson"
    # (running sums with Poisson weights: a run past the records kept whole, or --ci poisson).
    ci_method: str = "records"
    # The range the values take (rageval.core.scale), as the metric declares it; None: the
    # run did not record it (written before scales were).
    scale: Scale | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "value": _json_float(self.value),
            "n": self.n,
            "unscored": self.unscored,
            "ci95": None if self.ci95 is None else [_json_float(v) for v in self.ci95],
            "signature": self.signature,
            "aggregate": self.aggregate,
            "short_signature": self.short_signature,
            "component": not self.in_table,
        }
        if self.reasons:
            out["unscored_reasons"] = dict(self.reasons)
        if self.flagged:
            out["flagged"] = dict(self.flagged)
        if self.calibrated is not None:
            out["calibrated"] = self.calibrated.to_json()
        if self.ci_method != "records":
            out["ci_method"] = self.ci_method
        if self.scale is not None:
            out["scale"] = list(self.scale)
        out.update(self.figures)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MetricSummary:
        ci = data.get("ci95")
        return cls(
            value=_float_or_nan(data.get("value")),
            n=int(data["n"]),
            unscored=int(data["unscored"]),
            ci95=None if ci is None else (_float_or_nan(ci[0]), _float_or_nan(ci[1])),
            signature=str(data["signature"]),
            reasons=dict(data.get("unscored_reasons", {})),
            aggregate=str(data.get("aggregate", "mean")),
            short_signature=str(data.get("short_signature", "")),
            in_table=not data.get("component", False),
            flagged={str(k): int(v) for k, v in (data.get("flagged") or {}).items()},
            calibrated=(Calibration.from_json(data["calibrated"]) if data.get("calibrated")
                        else None),
            figures={k: v for k, v in data.items() if k not in _SUMMARY_KEYS},
            ci_method=str(data.get("ci_method", "records")),
            scale=scale_from_json(data.get("scale")),
        )


# The keys of a metric's summary.json entry that are not figures (MetricSummary.figures).
_SUMMARY_KEYS = frozenset({"value", "n", "unscored", "ci95", "signature", "aggregate",
                           "short_signature", "component", "unscored_reasons", "flagged",
                           "calibrated", "ci_method", "scale"})


@dataclass(frozen=True)
class RecordsInfo:
    """The manifest's ``records`` section, read once: where the records came from (a path, or
    ``<memory>``), how many there were, and the inputs of a run read from another tool's
    format (:meth:`~rageval.inputs.InputSpec.to_manifest`). A section that is missing or
    malformed (a hand-edited file) reads as unknown."""

    source: str | None = None
    count: int | None = None
    inputs: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> RecordsInfo:
        section = manifest.get("records")
        if not isinstance(section, Mapping):
            return cls()
        source, count, inputs = (section.get(k) for k in ("source", "count", "inputs"))
        return cls(source if isinstance(source, str) else None,
                   count if isinstance(count, int) and not isinstance(count, bool) else None,
                   inputs if isinstance(inputs, Mapping) else None)

    def scored_file(self, run: str) -> str:
        """The records file the run (described as ``run`` in errors) scored, where it still
        is; a usage error asks for ``--records FILE`` where the manifest names none or the
        file is gone."""
        if self.source is None or self.source == "<memory>":
            raise UsageError(f"{run} does not name a records file in its manifest (it scored "
                             "records held in memory): give it with --records FILE")
        if not Path(self.source).is_file():
            raise UsageError(f"{run} scored {self.source}, which no longer exists here: give "
                             "the records file with --records FILE")
        return self.source


@dataclass(frozen=True)
class RecordResult:
    id: str
    scores: dict[str, float | None]
    errors: dict[str, str]
    details: dict[str, Any]
    # A turn of a conversation: the conversation's id and the turn's 1-based position; a
    # conversation's own line (its conversation-level values) has the id and no turn.
    conversation: str | None = None
    turn: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.conversation is not None:
            out["conversation"] = self.conversation
            if self.turn is not None:  # none on a conversation's own line
                out["turn"] = self.turn
        out.update(scores={k: _json_float(v) for k, v in self.scores.items()},
                   details=self.details, errors=self.errors)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecordResult:
        scores = {k: _float_or_nan(v) for k, v in data.get("scores", {}).items()}
        conversation = data.get("conversation")
        return cls(str(data["id"]), scores,  # type: ignore[arg-type]
                   dict(data.get("errors", {})), dict(data.get("details", {})),
                   None if conversation is None else str(conversation),
                   None if data.get("turn") is None else int(data["turn"]))


@dataclass(frozen=True)
class Results:
    """Everything a run produced: per-record values, the summary and the manifest.

    ``records`` is a list, or for a run written to its directory as it went a
    :class:`~rageval.core.results.run_records.RecordsFile` that reads them back from there when
    asked."""

    records: Sequence[RecordResult]
    summary: dict[str, MetricSummary]
    manifest: dict[str, Any]

    def __iter__(self) -> Iterator[RecordResult]:
        return iter(self.records)

    @property
    def records_info(self) -> RecordsInfo:
        """The manifest's ``records`` section (:class:`RecordsInfo`)."""
        return RecordsInfo.of(self.manifest)

    @classmethod
    def load(cls, run_dir: str | os.PathLike[str]) -> Results:
        """Read a run directory written by :meth:`write` (``rageval score --out DIR``).

        Unscored values come back as NaN. Raises :class:`~rageval.core.errors.InputError` naming the
        file and line when the directory or a file is missing or malformed.
        """
        records_path = Path(run_dir) / "records.jsonl"
        for _ in range(3):  # a run swapped in while the two files were read: read it again
            before = identity(run_dir)
            summary, manifest, digest = read_summary(run_dir)
            raw = records_path.read_bytes()
            whole = digest is None or hashlib.sha256(raw).hexdigest() == digest
            if whole or identity(run_dir) == before:
                break
        if not whole:
            raise InputError(
                "records.jsonl is not the one written with summary.json (a run was interrupted "
                "while writing them?): score the run again", path=str(run_dir))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"not UTF-8: {error.reason}", path=str(records_path)) from None
        records = [record_result(line, records_path, number)
                   for number, line in enumerate(text.split("\n"), 1) if line.strip()]
        return cls(records, summary, manifest)

    def conversations(self) -> list[dict[str, Any]]:
        """Each conversation of the run summed up from its turns (what
        ``conversations.jsonl`` holds: :mod:`rageval.core.results.conversations`); empty for a run
        without conversations."""
        section = self.manifest.get("conversations")
        if not isinstance(section, Mapping):
            return []
        return list(conversation_rows(self.records, TurnRules.from_json(section)))

    def scored_nothing(self) -> list[str]:
        """One line for each requested metric that scored no record at all: what failed, how
        often, and the first reason (a judge's own words). Empty when every metric has values.
        """
        lines = []
        total = len(self.records)
        for name in self.manifest.get("metrics", []):
            item = self.summary.get(name)
            if item is None or item.n > 0:
                continue
            reason, count = max(item.reasons.items(), key=lambda kv: kv[1],
                                default=("no reason recorded", total))
            others = len(item.reasons) - 1
            more = f" (and {others} other reason{'s' * (others > 1)})" if others > 0 else ""
            lines.append(f"{name} scored none of the {count_of(total, 'record')}: "
                         f"{count} x {reason}{more}")
        return lines

    def records_frame(self, backend: str = "polars", *, details: bool = False) -> Any:
        """Per-record scores as a DataFrame: ``id`` (and, for a run of conversations,
        ``conversation`` and ``turn``) then one float column per output name (null/NaN where
        unscored). ``backend`` is ``"polars"`` or ``"pandas"``.

        ``details=True`` adds two columns: ``errors`` (each unscored value's reason, by output
        name) and ``details`` (what the metrics recorded: judge reasoning, claims, ...). With
        pandas they hold dicts; with polars JSON text (``pl.col("details").str.json_decode()``
        turns it into structs), since records' details differ in shape.
        """
        rows = list(self.records)  # one pass over a run read back from its file
        names = list(dict.fromkeys(n for r in rows for n in r.scores))
        columns: dict[str, list[Any]] = {"id": [r.id for r in rows]}
        if any(r.conversation is not None for r in rows):  # a run of conversations
            columns["conversation"] = [r.conversation for r in rows]
            columns["turn"] = [r.turn for r in rows]
        for name in names:
            columns[name] = [_none_if_nan(r.scores.get(name)) for r in rows]
        if details:
            as_text = backend == "polars"
            for key in ("errors", "details"):
                values = [getattr(r, key) for r in rows]
                columns[key] = ([json.dumps(v, ensure_ascii=False) for v in values] if as_text
                                else values)
        return frame(columns, backend)

    def to_pandas(self, *, details: bool = False) -> Any:
        """One row per record, one column per metric output (NaN where unscored): the pandas
        form of :meth:`records_frame` (``pip install 'rageval[pandas]'``)."""
        return self.records_frame("pandas", details=details)

    def to_polars(self, *, details: bool = False) -> Any:
        """One row per record, one column per metric output (null where unscored): the polars
        form of :meth:`records_frame`."""
        return self.records_frame("polars", details=details)

    def summary_frame(self, backend: str = "polars") -> Any:
        """The summary as a DataFrame: one row per output name with value, n, unscored,
        ci95_low, ci95_high, aggregate and signature."""
        items = self.summary.items()
        columns: dict[str, list[Any]] = {
            "metric": [name for name, _ in items],
            "value": [_none_if_nan(s.value) for _, s in items],
            "n": [s.n for _, s in items],
            "unscored": [s.unscored for _, s in items],
            "ci95_low": [None if s.ci95 is None else _none_if_nan(s.ci95[0]) for _, s in items],
            "ci95_high": [None if s.ci95 is None else _none_if_nan(s.ci95[1]) for _, s in items],
            "aggregate": [s.aggregate for _, s in items],
            "signature": [s.signature for _, s in items],
        }
        if any(s.calibrated is not None for _, s in items):
            columns.update(calibration_columns([s.calibrated for _, s in items]))
        for figure, keys in (("stability", ("flip_rate", "mean_sd")),
                             ("panel", ("krippendorff_alpha",))):
            if any(figure in s.figures for _, s in items):
                for key in keys:
                    columns[key] = [(s.figures.get(figure) or {}).get(key) for _, s in items]
        return frame(columns, backend)

    def summary_json(self) -> dict[str, Any]:
        return {
            "metrics": {name: s.to_json() for name, s in self.summary.items()},
            "manifest": self.manifest,
        }

    def write(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write ``records.jsonl`` and ``summary.json`` into ``out_dir`` (created if needed),
        and ``conversations.jsonl`` for a run with conversations.

        The directory changes in one step
        (:class:`~rageval.core.outputs.run_directory.RunDirectory`): a reader finds the run
        that was there or this one, never a mix, and a crash on the way leaves the earlier run
        whole. Files of the directory that are not a run's are kept. Raises
        :class:`~rageval.core.outputs.run_directory.RunDirectoryBusy` while another process
        writes the same directory.
        """
        directory = Path(out_dir)
        run = RunDirectory(directory)
        run.begin()
        try:
            staging = run.staging()
            target = staging / "records.jsonl"
            copy_to = getattr(self.records, "copy_to", None)
            if copy_to is not None:  # written as the run went (core.results.run_records)
                digest = copy_to(target)
            else:
                records = utf8_record_lines([r.to_json() for r in self.records])
                target.write_bytes(records)
                digest = hashlib.sha256(records).hexdigest()
            write_conversations(staging, self.records, self.manifest)
            document = {**self.summary_json(), RECORDS_DIGEST: digest}
            summary = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
            (staging / "summary.json").write_text(summary + "\n", encoding="utf-8")
            run.commit()
        except BaseException:
            run.abort()
            raise
        return directory


def read_summary(run_dir: str | os.PathLike[str]
                 ) -> tuple[dict[str, MetricSummary], dict[str, Any], str | None]:
    """A run directory's summary, manifest and records digest (``summary.json``), once the
    directory is checked to hold both files."""
    directory = Path(run_dir)
    summary_path = directory / "summary.json"
    if not directory.is_dir():
        raise InputError("not a run directory (written by rageval score --out DIR)",
                         path=str(directory))
    for path in (summary_path, directory / "records.jsonl"):
        if not path.is_file():
            raise InputError(f"run directory lacks {path.name}", path=str(directory))
    try:
        data = json.loads(summary_path.read_text(encoding="utf-8"))
        summary = {name: MetricSummary.from_json(item)
                   for name, item in data["metrics"].items()}
        manifest = dict(data.get("manifest", {}))
        digest = data.get(RECORDS_DIGEST)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        raise InputError(f"malformed summary: {error!r}", path=str(summary_path)) from None
    return summary, manifest, digest


def record_result(line: str, path: Path, number: int) -> RecordResult:
    """One line of ``records.jsonl`` (errors name the file and line)."""
    try:
        return RecordResult.from_json(json.loads(line))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise InputError(f"malformed record result: {error!r}", path=str(path),
                         line=number) from None


def _float_or_nan(value: Any) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number or null, got {value!r}")
    return float(value)


def _none_if_nan(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _json_float(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)
