"""ALCE's citation checks for every record of a run: which statements their citations support.

The answer is read into statements and their citations (:mod:`.citation_text`). Then up to
three rounds of ``check_claims`` requests, each labelling up to :data:`CHUNK` statements
against one set of cited passages shown together (ALCE's NLI model reads a statement against
the concatenated passages; here the judge does, and "entailment" is support):

1. every statement with valid citations, against the passages it cites (recall, and the
   precision of single-citation statements);
2. each passage of a supported statement citing several, alone (ALCE's condition A);
3. where a passage alone does not support it, the other cited passages without it (condition
   B: a passage is unnecessary when the others still support the statement).

Statements citing the same passages share requests, so a record costs about one request per
distinct set of cited passages rather than one per statement and passage set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rageval.core.metric import context_text_reason
from rageval.judge.claims.asking import Asked, Asker, Outcome, replies_used
from rageval.judge.claims.citation_scores import Check, needed_checks, statement_entry
from rageval.judge.claims.citation_text import read_citations
from rageval.judge.claims.step_replies import parse_labels
from rageval.judge.claims.steps import CHECK_LABELS, labels_schema

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = ["CHUNK", "analyse_citations"]

CHUNK = 10
_WHAT = {"supported": "the passages it cites", "alone": "each cited passage alone",
         "without": "the other cited passages"}


@dataclass
class _Record:
    record: Record
    statements: list[dict[str, Any]] | None = None
    errors: dict[str, str] = field(default_factory=dict)
    used: list[Outcome] = field(default_factory=list)

    def details(self) -> dict[str, Any]:
        return {"statements": self.statements, "errors": self.errors,
                **replies_used(self.used)}


def analyse_citations(asker: Asker, max_citations: int,
                      precision: bool) -> list[dict[str, Any]]:
    """The citations details of every record of ``asker``'s run; ``precision``: whether the
    checks citation precision needs are asked too (recall needs the first round only)."""
    state = [_read(_Record(record), max_citations) for record in asker.records]
    metric = "precision" if precision else "recall"
    for _ in range(3):  # supported, then alone, then without
        if not _round(asker, state, metric):
            break
    return [item.details() for item in state]


def _read(item: _Record, max_citations: int) -> _Record:
    if item.record.answer is None:
        item.errors["statements"] = "no answer (the record has no 'answer')"
        return item
    if not item.record.contexts:  # nothing it could cite: no evidence of citation quality
        item.errors["statements"] = "the record has no contexts (ALCE scores such an answer 0)"
        return item
    if (reason := context_text_reason(item.record)) is not None:
        item.errors["statements"] = reason  # ids alone: no passage to support a statement
        return item
    ids = [c.id for c in item.record.contexts]
    item.statements = [statement_entry(statement)
                       for statement in read_citations(item.record.answer, ids, max_citations)]
    return item


@dataclass(frozen=True)
class _Job:
    asked: Asked
    item: _Record
    targets: list[tuple[int, Check]]  # (statement index, the question)


def _round(asker: Asker, state: list[_Record], metric: str) -> bool:
    """Ask every question that can be asked now; False when there was none."""
    jobs: list[_Job] = []
    for index, item in enumerate(state):
        groups: dict[tuple[str, ...], list[tuple[int, Check]]] = {}
        for n, entry in enumerate(item.statements or []):
            if any(piece in item.errors for piece in ("supported", "alone", "without")):
                break  # a failed round: the metric is unscored with its reason
            for check in needed_checks(entry, metric):
                groups.setdefault(check.passages, []).append((n, check))
        for passages, targets in groups.items():
            jobs += _asks(asker, index, item, passages, targets)
    sizes = {job.asked.unit.key: len(job.targets) for job in jobs}
    outcomes = asker.send([job.asked for job in jobs],
                          lambda asked, text: parse_labels(text, "verdicts",
                                                           sizes[asked.unit.key], CHECK_LABELS))
    for job in jobs:
        _apply(job, outcomes[job.asked.unit.key])
    return bool(jobs)


def _apply(job: _Job, outcome: Outcome) -> None:
    job.item.used.append(outcome)
    if not outcome.ok:
        piece = job.targets[0][1].piece
        job.item.errors.setdefault(piece, f"checking statements against {_WHAT[piece]}: "
                                          f"{outcome.error}")
        return
    for (n, check), verdict in zip(job.targets, outcome.value, strict=True):
        entry = (job.item.statements or [])[n]
        supported = verdict == "entailment"
        if check.ctx_id is None:
            entry[check.piece] = supported
        else:
            entry[check.piece] = {**(entry[check.piece] or {}), check.ctx_id: supported}


def _asks(asker: Asker, index: int, item: _Record, passages: tuple[str, ...],
          targets: list[tuple[int, Check]]) -> list[_Job]:
    record = item.record
    by_id = {c.id: c.text for c in record.contexts}
    query = [] if record.query is None else [record.query]
    statements = item.statements or []
    jobs = []
    for start in range(0, len(targets), CHUNK):
        chunk = targets[start:start + CHUNK]
        asked = asker.ask(index, "check_claims",
                          {"query": query, "evidence": [by_id[c] for c in passages],
                           "claims": [statements[n]["text"] for n, _ in chunk]},
                          labels_schema("check_claims", "verdicts", len(chunk), CHECK_LABELS))
        jobs.append(_Job(asked, item, chunk))
    return jobs
