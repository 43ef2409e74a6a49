"""TREC 2024 RAG's AutoNuggetizer for every record of a run: nuggets, importance, assignment.

Round one creates each record's nuggets (``nuggets_create``) from its reference answer(s)
(``source=reference``) or from its contexts judged relevant (``source=contexts``: a grade above
0 in the record's judgments), keeping at most :data:`MAX_NUGGETS` as AutoNuggetizer does,
unless the record gives its own ``nuggets``. Round two labels them, :data:`CHUNK` nuggets per
request as AutoNuggetizer does: ``vital`` or ``okay`` (``nuggets_importance``, only when a
requested metric uses importance) and support by the answer (``nuggets_assign``). Nuggets made
from a reference depend on the query and the reference alone, so two systems compared on the
same questions share them through the cache: the second system costs only its assignments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rageval.core.metric import context_text_reason
from rageval.judge.claims.asking import Asked, Asker, Outcome, replies_used
from rageval.judge.claims.step_replies import parse_labels, parse_texts
from rageval.judge.claims.steps import (
    ASSIGN_LABELS,
    IMPORTANCE_LABELS,
    labels_schema,
    list_schema,
)
from rageval.judge.claims.supplied import supplied_nuggets

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = ["CHUNK", "MAX_NUGGETS", "SOURCES", "analyse_nuggets"]

CHUNK = 10
MAX_NUGGETS = 30
SOURCES = ("reference", "contexts")
# label kind -> (step, the labels, whether the answer is shown)
_LABELLING = {"importance": ("nuggets_importance", IMPORTANCE_LABELS, False),
              "assignment": ("nuggets_assign", ASSIGN_LABELS, True)}


@dataclass
class _Record:
    record: Record
    source: str
    nuggets: list[dict[str, Any]] | None = None
    errors: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    used: list[Outcome] = field(default_factory=list)

    def details(self) -> dict[str, Any]:
        return {"source": self.source, "nuggets": self.nuggets, "errors": self.errors,
                "sources": self.sources, **replies_used(self.used)}


def analyse_nuggets(asker: Asker, source: str, importance: bool) -> list[dict[str, Any]]:
    """The nuggets details of every record; ``importance``: whether vital/okay is needed."""
    state = [_Record(record, source) for record in asker.records]
    _create(asker, state, source)
    kinds = ["importance", "assignment"] if importance else ["assignment"]
    _label(asker, state, kinds)
    return [item.details() for item in state]


def _create(asker: Asker, state: list[_Record], source: str) -> None:
    jobs: list[tuple[Asked, _Record]] = []
    for index, item in enumerate(state):
        given = supplied_nuggets(item.record)
        if given is not None:
            item.source = item.sources["nuggets"] = "record"
            item.nuggets = [{"text": text, "importance": None, "assignment": None}
                            for text in given.texts]
            for kind in _LABELLING:
                labels = getattr(given, kind)
                if labels is not None:
                    item.sources[kind] = "record"
                    for nugget, label in zip(item.nuggets, labels, strict=True):
                        nugget[kind] = label
            continue
        texts, why = _source_texts(item.record, source)
        if texts is None:
            item.errors["nuggets"] = why
            continue
        query = [] if item.record.query is None else [item.record.query]
        jobs.append((asker.ask(index, "nuggets_create", {"query": query, "sources": texts},
                               list_schema("nuggets_create", "nuggets")), item))
    outcomes = asker.send([asked for asked, _ in jobs],
                          lambda _, text: parse_texts(text, "nuggets"))
    for asked, item in jobs:
        outcome = outcomes[asked.unit.key]
        item.used.append(outcome)
        item.sources["nuggets"] = "judge"
        if outcome.ok:
            item.nuggets = [{"text": text, "importance": None, "assignment": None}
                            for text in outcome.value[:MAX_NUGGETS]]
        else:
            item.errors["nuggets"] = f"creating the nuggets: {outcome.error}"


def _source_texts(record: Record, source: str) -> tuple[list[str] | None, str]:
    if source == "reference":
        if not record.references:
            return None, "no reference to create nuggets from"
        return list(record.references), ""
    if record.judgments is None:
        return None, "no judgments to tell the relevant contexts (source=contexts)"
    if (reason := context_text_reason(record)) is not None:
        return None, f"{reason} (source=contexts)"
    relevant = [c.text for c in record.contexts if record.judgments.get(c.id, 0) > 0]
    if not relevant:
        return None, "no context is judged relevant to create nuggets from (source=contexts)"
    return relevant, ""


@dataclass(frozen=True)
class _Labels:
    asked: Asked
    item: _Record
    kind: str
    start: int
    count: int


def _label(asker: Asker, state: list[_Record], kinds: list[str]) -> None:
    jobs: list[_Labels] = []
    for index, item in enumerate(state):
        for kind in kinds:
            jobs += _plan(asker, index, item, kind)
    sizes = {job.asked.unit.key: (job.count, _LABELLING[job.kind][1]) for job in jobs}
    outcomes = asker.send([job.asked for job in jobs],
                          lambda asked, text: parse_labels(text, "labels",
                                                           *sizes[asked.unit.key]))
    for job in jobs:
        outcome = outcomes[job.asked.unit.key]
        job.item.used.append(outcome)
        if not outcome.ok:
            job.item.errors.setdefault(job.kind, f"labelling the nuggets' {job.kind}: "
                                                 f"{outcome.error}")
            continue
        for offset, label in enumerate(outcome.value):
            (job.item.nuggets or [])[job.start + offset][job.kind] = label


def _plan(asker: Asker, index: int, item: _Record, kind: str) -> list[_Labels]:
    if item.nuggets is None or item.sources.get(kind) == "record":
        return []
    if not item.nuggets:  # nothing to label: as the (empty) list came
        item.sources[kind] = item.sources.get("nuggets", "judge")
        return []
    step, labels, with_answer = _LABELLING[kind]
    record = item.record
    if with_answer and record.answer is None:
        item.errors[kind] = "no answer to assign the nuggets to"
        return []
    item.sources[kind] = "judge"
    inputs = {"query": [] if record.query is None else [record.query]}
    if with_answer:
        inputs["answer"] = [record.answer or ""]
    jobs = []
    for start in range(0, len(item.nuggets), CHUNK):
        chunk = [nugget["text"] for nugget in item.nuggets[start:start + CHUNK]]
        asked = asker.ask(index, step, {**inputs, "nuggets": chunk},
                          labels_schema(step, "labels", len(chunk), labels))
        jobs.append(_Labels(asked, item, kind, start, len(chunk)))
    return jobs
