"""What to read: :class:`InputSpec`, what was read: :class:`LoadedInputs`, and field maps.

Nothing here imports polars: the command line builds a spec (and parses ``--map`` items) before
deciding whether anything needs loading.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rageval.core.errors import UsageError, did_you_mean
from rageval.core.urls import public_url

if TYPE_CHECKING:
    from rageval.core.records.judgments import Qrels
    from rageval.core.records.model import Record

__all__ = [
    "INPUT_KINDS",
    "MAP_FIELDS",
    "TRACE_KINDS",
    "InputSpec",
    "LoadedInputs",
    "check_field_map",
    "moment",
    "parse_field_map",
]

#: How the columns of a records file are read (:attr:`InputSpec.kind`).
INPUT_KINDS: tuple[str, ...] = ("records", "ragas", "trec-rag", "openinference", "otel-genai")
#: The kinds read from traces, each by its conventions (a Phoenix server's: OpenInference).
TRACE_KINDS: tuple[str, ...] = ("openinference", "otel-genai")

#: The rageval fields a ``FIELD=COLUMN`` map may name (``claims`` and ``nuggets`` are read
#: from a record's extra fields by the claim and nugget metrics).
MAP_FIELDS: tuple[str, ...] = (
    "id", "query", "contexts", "answer", "reference", "judgments", "claims", "nuggets",
)

FieldMap = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class InputSpec:
    """The files to build records from: a records file read as ``kind``, or a TREC run joined
    with query and document texts (see ``docs/inputs.md``)."""

    records: str | None = None
    kind: str = "records"
    field_map: FieldMap = ()
    format: str | None = None
    run: str | None = None
    queries: str | None = None
    corpus: str | None = None
    beir: str | None = None
    split: str = "test"
    depth: int | None = None
    max_line_bytes: int | None = None
    phoenix: str | None = None
    project: str | None = None
    trace_unit: str = "trace"
    # Records of traces that share a session id (OpenInference's session.id, GenAI's
    # gen_ai.conversation.id) become the turns of one conversation (the whole input held
    # until it is read: rageval.inputs.traces).
    sessions: bool = False
    references: str | None = None
    since: str | None = None
    until: str | None = None

    def is_plain(self) -> bool:
        """A records file in rageval's own format, read as :func:`load_records` reads it."""
        if (self.run is not None or self.kind != "records" or self.field_map or self.corpus
                or self.phoenix is not None):
            return False
        if self.format is not None:
            return self.format != "arrow"
        path = os.fspath(self.records or "")
        return not (path.endswith(".arrow") or os.path.isdir(path))

    def reader(self) -> str:
        """The kind of input to read (``run``, or the records file's :attr:`kind`), once the
        spec is checked to hold together: raises :class:`UsageError` naming what does not."""
        if self.run is not None:
            self._check_run()
            return "run"
        if self.kind == "otel-genai":
            self._check_traces()
            return "otel-genai"
        if self.phoenix is not None or self.kind == "openinference":
            self._check_traces()
            return "openinference"
        self._check_records()
        if self.records is None:
            raise UsageError("nothing to read: give a records file or a run")
        return self.kind

    def _check_traces(self) -> None:
        from rageval.inputs.traces.openinference import TRACE_MAP_FIELDS

        genai = self.kind == "otel-genai"
        if self.phoenix is not None and genai:
            raise UsageError("a Phoenix server's spans are read by the OpenInference "
                             "conventions: otel-genai reads an OTLP/JSON file")
        if self.phoenix is not None:
            if self.records is not None:
                raise UsageError("give a traces file or a Phoenix server (phoenix=), not both")
            if not self.project:
                raise UsageError("a Phoenix server needs the project to read (--project NAME)")
        elif self.records is None:
            raise UsageError("nothing to read: give a traces file (OTLP/JSON) or a Phoenix "
                             "server and project")
        if self.kind not in ("records", *TRACE_KINDS):
            raise UsageError(f"traces are read as {' or '.join(map(repr, TRACE_KINDS))}, not "
                             f"as {self.kind!r}")
        for name in ("queries", "beir", "depth", "corpus"):
            if getattr(self, name) is not None:
                raise UsageError(f"{name} does not apply to traces")
        for field, _ in check_field_map(self.field_map):
            if field not in TRACE_MAP_FIELDS:
                raise UsageError(f"a field map for traces reads {list(TRACE_MAP_FIELDS)} from "
                                 f"span attributes; {field} cannot be mapped (contexts come "
                                 f"from {'retrieval' if genai else 'RETRIEVER'} spans, "
                                 "judgments from --references or --qrels)")
        if self.format is not None:
            raise UsageError("traces are read as OTLP/JSON: a records format does not apply")
        if (self.since is not None or self.until is not None) and self.phoenix is None:
            raise UsageError("a time window (since, until) selects the spans of a Phoenix "
                             "project: give a Phoenix server")
        for name in ("since", "until"):
            moment(getattr(self, name), name)
        self._check_unit(genai)

    def _check_unit(self, genai: bool) -> None:
        from rageval.inputs.traces.genai import OPERATIONS
        from rageval.inputs.traces.spans import SPAN_KINDS

        choices, what = (OPERATIONS, "an operation") if genai else (SPAN_KINDS, "a span kind")
        if self.unit() != "trace" and self.unit() not in choices:
            hint = did_you_mean(self.unit(), choices)
            hint = f" ({hint})" if hint else ""
            raise UsageError(f"unknown trace unit {self.trace_unit!r}{hint}: 'trace' or {what}, "
                             f"one of {list(choices)}")

    def unit(self) -> str:
        """The trace unit, spelled as the conventions do: ``trace``, an upper-case
        OpenInference kind or a lower-case GenAI operation."""
        unit = self.trace_unit
        if unit.lower() == "trace":
            return "trace"
        return unit.lower() if self.kind == "otel-genai" else unit.upper()

    def _check_run(self) -> None:
        if self.records is not None:
            raise UsageError("give a records file or a run, not both")
        if (self.phoenix is not None or self.references is not None or self.project
                or self.unit() != "trace" or self.sessions):
            raise UsageError("a Phoenix server, references, a project, a trace unit and "
                             "sessions apply to traces, not to a run")
        if self.field_map:
            raise UsageError("a field map applies to a records file, not to a run")
        if self.format is not None:
            raise UsageError("format applies to a records file, not to a run")
        if self.beir is not None and (self.queries is not None or self.corpus is not None):
            raise UsageError("a BEIR directory gives the queries and the corpus: give it, or "
                             "queries and corpus files, not both")
        if self.depth is not None and (isinstance(self.depth, bool)
                                       or not isinstance(self.depth, int) or self.depth < 1):
            raise UsageError(f"depth must be a positive integer, got {self.depth!r}")
        if not isinstance(self.split, str) or not self.split:
            raise UsageError(f"split must be a non-empty name, got {self.split!r}")

    def _check_records(self) -> None:
        if self.kind not in INPUT_KINDS:
            raise UsageError(f"unknown input kind {self.kind!r}; expected one of "
                             f"{list(INPUT_KINDS)}")
        check_field_map(self.field_map)
        for name in ("queries", "beir", "depth"):
            if getattr(self, name) is not None:
                raise UsageError(f"{name} applies to a run (give run=), not to a records file")
        if self.corpus is not None and self.kind != "trec-rag":
            raise UsageError("a corpus applies to a run or to a TREC RAG file (kind 'trec-rag')")
        if (self.references is not None or self.unit() != "trace" or self.project
                or self.since is not None or self.until is not None or self.sessions):
            raise UsageError("references, a trace unit, sessions, a project and a time window "
                             "apply to traces (--input-format openinference or otel-genai, or "
                             "--phoenix)")
        if self.kind == "trec-rag" and self.field_map:
            raise UsageError("a field map does not apply to a TREC RAG file: its fields are "
                             "fixed")

    def to_manifest(self) -> dict[str, Any]:
        """Every field, JSON-able, so that :meth:`from_manifest` reads the records again."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["field_map"] = dict(self.field_map)
        if self.phoenix is not None:  # refused when it carries secrets; stored without anyway
            out["phoenix"] = public_url(self.phoenix)
        return out

    @classmethod
    def from_manifest(cls, data: Mapping[str, Any]) -> InputSpec:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["field_map"] = tuple(dict(values.get("field_map") or {}).items())
        return cls(**values)

    def beir_paths(self) -> tuple[str, str, str] | None:
        """The queries, corpus and qrels files of the BEIR directory, when one is given."""
        if self.beir is None:
            return None
        root = os.fspath(self.beir)
        return (os.path.join(root, "queries.jsonl"), os.path.join(root, "corpus.jsonl"),
                os.path.join(root, "qrels", f"{self.split}.tsv"))

    def describe(self) -> dict[str, Any]:
        """A JSON-able description for the run manifest: the paths read, and for a records
        file its kind and field map. Nothing else (no contents, no options)."""
        if self.run is not None:
            out: dict[str, Any] = {"run": os.fspath(self.run)}
            for key in ("queries", "corpus", "beir"):
                value = getattr(self, key)
                if value is not None:
                    out[key] = os.fspath(value)
            paths = self.beir_paths()
            if paths is not None:
                out["qrels"] = paths[2]  # the split read, as the path of its qrels file
            return out
        if self.phoenix is not None or self.kind in TRACE_KINDS:
            return self._describe_traces()
        out = {"records": None if self.records is None else os.fspath(self.records),
               "kind": self.kind, "map": dict(self.field_map)}
        if self.corpus is not None:
            out["corpus"] = os.fspath(self.corpus)
        return out


    def _describe_traces(self) -> dict[str, Any]:
        kind = "otel-genai" if self.kind == "otel-genai" else "openinference"
        out: dict[str, Any] = {"kind": kind, "unit": self.trace_unit,
                               "map": dict(self.field_map)}
        if self.sessions:
            out["sessions"] = True
        if self.phoenix is not None:
            out.update(phoenix=public_url(self.phoenix), project=self.project)
            out.update({k: v for k, v in (("since", self.since), ("until", self.until)) if v})
        else:
            out["records"] = os.fspath(self.records or "")
        if self.references is not None:
            out["references"] = os.fspath(self.references)
        return out


def moment(text: str | None, name: str) -> datetime | None:
    """An ISO 8601 time (``2026-11-26T09:00``, ``2026-11-26``), in UTC when it names no
    zone; None for None. A :class:`UsageError` naming ``name`` when it is not one."""
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise UsageError(f"{name}: expected an ISO 8601 time (2026-11-26T09:00:00, in UTC "
                         f"unless it names a zone), got {text!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class LoadedInputs:
    """Validated records and where they came from; ``judgments_source`` says where their
    judgments came from when a file beside the records gave them (``beir-qrels``).

    :func:`~rageval.inputs.load_inputs` hands the records out judged. A run reads them
    unjudged, with the ``qrels`` (from ``qrels_path``) beside them, and joins the two where
    it joins every other judgment.
    """

    records: list[Record]
    source: str
    judgments_source: str | None = None
    qrels: Qrels | None = None
    qrels_path: str | None = None


def parse_field_map(items: Iterable[str]) -> FieldMap:
    """``FIELD=COLUMN`` items (``query=question``) -> ``(field, column)`` pairs.

    The first ``=`` splits an item, so a column name may hold ``=``; the field may be padded
    with spaces, the column is kept as written. Raises :class:`UsageError` naming the item for
    a missing ``=``, an empty side, a field that is not one of :data:`MAP_FIELDS`, or a field
    mapped twice.
    """
    pairs: list[tuple[str, str]] = []
    for item in items:
        field, sep, column = item.partition("=")
        field = field.strip()
        if not sep:
            raise UsageError(f"--map item {item!r}: expected FIELD=COLUMN (e.g. query=question)")
        if not field or not column.strip():
            side = "field" if not field else "column"
            raise UsageError(f"--map item {item!r}: the {side} is empty; expected FIELD=COLUMN")
        pairs.append((field, column))
    check_field_map(pairs, items=True)
    return tuple(pairs)


def check_field_map(pairs: Iterable[tuple[str, str]], *, items: bool = False) -> FieldMap:
    """The pairs of a field map, checked: known fields, non-empty columns, each field once.
    ``items`` words the errors for ``--map`` items rather than for a ``map`` table."""
    seen: dict[str, str] = {}
    for pair in pairs:
        if (not isinstance(pair, tuple) or len(pair) != 2
                or not all(isinstance(part, str) for part in pair)):
            raise UsageError(f"field map entry {pair!r}: expected a (field, column) pair")
        field, column = pair
        shown = f"--map item '{field}={column}'" if items else f"map entry {field} = {column!r}"
        if field not in MAP_FIELDS:
            hint = did_you_mean(field, MAP_FIELDS)
            hint = f" ({hint})" if hint else ""
            raise UsageError(f"{shown}: unknown field {field!r}{hint}; the fields are "
                             f"{', '.join(MAP_FIELDS)}")
        if not column.strip():
            raise UsageError(f"{shown}: the column is empty")
        if field in seen:
            raise UsageError(f"{shown}: field {field!r} is mapped twice (also to "
                             f"{seen[field]!r})")
        seen[field] = column
    return tuple(seen.items())
