"""RAGChecker's intermediate results for every record of a run: claims and their verdicts.

Two rounds of requests. First the claims: the answer's and the reference's, each extracted in
one request (``extract_claims``) unless the record gives them. Then the checks the requested
metrics need (:data:`PIECES`), each a request labelling up to :data:`CHUNK` claims against one
piece of evidence (``check_claims``): the answer's claims against the reference(s) and against
each context, the reference's claims against the answer and against each context. A record
with ``a`` answer claims, ``r`` reference claims and ``k`` contexts costs at most
``2 + (1 + k) * (ceil(a / CHUNK) + ceil(r / CHUNK))`` requests, where checking each claim
against each text on its own would cost ``2 + (1 + k) * (a + r)``.

The result is one details dict per record (the format :mod:`.claim_scores` reads): claims,
verdicts (None where not asked or failed), the reason of every failed step under ``errors``,
where each part came from (``sources``: ``judge`` or ``record``), and the replies it used.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rageval.core.metric import context_text_reason
from rageval.judge.claims.asking import Asked, Asker, Outcome, replies_used
from rageval.judge.claims.step_replies import parse_labels, parse_texts
from rageval.judge.claims.steps import CHECK_LABELS, labels_schema, list_schema
from rageval.judge.claims.supplied import SuppliedClaims, supplied_claims

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = ["CHUNK", "PIECES", "analyse_claims", "requests_bound"]

#: Claims labelled by one check request (RAGChecker's joint checking labels 5 at a time).
CHUNK = 10
PIECES = ("answer_claims.reference", "answer_claims.contexts", "reference_claims.answer",
          "reference_claims.contexts")
_OTHER = {"answer_claims": "reference", "reference_claims": "answer"}
_OWNER = {"answer_claims": "the answer", "reference_claims": "the reference"}


@dataclass
class _Record:
    """What is known of one record's claims while the rounds run."""

    record: Record
    claims: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    used: list[Outcome] = field(default_factory=list)

    def details(self) -> dict[str, Any]:
        return {"contexts": [c.id for c in self.record.contexts],
                "answer_claims": self.claims.get("answer_claims"),
                "reference_claims": self.claims.get("reference_claims"),
                "errors": self.errors, "sources": self.sources, **replies_used(self.used)}


def analyse_claims(asker: Asker, pieces: Collection[str]) -> list[dict[str, Any]]:
    """The claims details of every record of ``asker``'s run, for the checks in ``pieces``."""
    state = [_Record(record) for record in asker.records]
    sides = [side for side in _OTHER if any(p.startswith(side + ".") for p in pieces)]
    # a side whose claims are checked against the contexts only: no use extracting them from a
    # record whose contexts have no text
    contexts_only = {side for side in sides
                     if all(p.endswith(".contexts") for p in pieces if p.startswith(side + "."))}
    _extract(asker, state, sides, contexts_only)
    _check(asker, state, [p for p in PIECES if p in pieces])
    return [item.details() for item in state]


def requests_bound(answer_claims: int, reference_claims: int, contexts: int) -> tuple[int, int]:
    """Requests for one record with every claim metric: rageval's batched design, and a design
    that checks each claim against each text in its own request."""
    batched = 2 + (1 + contexts) * (math.ceil(answer_claims / CHUNK)
                                    + math.ceil(reference_claims / CHUNK))
    return batched, 2 + (1 + contexts) * (answer_claims + reference_claims)


# ---- round 1: the claims ---------------------------------------------------------------------


def _extract(asker: Asker, state: list[_Record], sides: list[str],
             contexts_only: set[str]) -> None:
    jobs: list[tuple[Asked, _Record, str]] = []
    for index, item in enumerate(state):
        given = supplied_claims(item.record)
        textless = context_text_reason(item.record) if contexts_only else None
        for side in sides:
            supplied = given.get(side.removesuffix("_claims"))
            if supplied is not None:
                item.claims[side] = _from_record(supplied, side)
                item.sources[side] = "record"
                continue
            text = _own_text(item.record, side)
            if text is None:
                item.claims[side] = None
                item.errors[side] = f"no {side.removesuffix('_claims')} to take claims from"
                continue
            if textless is not None and side in contexts_only:
                item.claims[side] = None  # nothing to check them against: not extracted
                item.errors[side] = textless
                continue
            query = [] if item.record.query is None else [item.record.query]
            asked = asker.ask(index, "extract_claims", {"query": query, "text": [text]},
                              list_schema("extract_claims", "claims"))
            jobs.append((asked, item, side))
    outcomes = asker.send([asked for asked, _, _ in jobs],
                          lambda _, text: parse_texts(text, "claims"))
    for asked, item, side in jobs:
        outcome = outcomes[asked.unit.key]
        item.used.append(outcome)
        item.sources[side] = "judge"
        if outcome.ok:
            item.claims[side] = [_claim(side, text) for text in outcome.value]
        else:
            item.claims[side] = None
            item.errors[side] = f"extracting the claims of {_OWNER[side]}: {outcome.error}"


def _own_text(record: Record, side: str) -> str | None:
    if side == "answer_claims":
        return record.answer
    return "\n\n".join(record.references) if record.references else None


def _claim(side: str, text: str) -> dict[str, Any]:
    return {"text": text, _OTHER[side]: None, "contexts": None}


def _from_record(supplied: SuppliedClaims, side: str) -> list[dict[str, Any]]:
    claims = [_claim(side, text) for text in supplied.texts]
    for n, claim in enumerate(claims):
        if supplied.other is not None:
            claim[_OTHER[side]] = supplied.other[n]
        if supplied.contexts is not None:
            claim["contexts"] = dict(supplied.contexts[n])
    return claims


# ---- round 2: the checks ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Check:
    """One check request: which claims (from ``start``) of which piece, against what."""

    asked: Asked
    item: _Record
    piece: str
    start: int
    context: str | None  # the context id, for a piece against the contexts


def _check(asker: Asker, state: list[_Record], pieces: list[str]) -> None:
    jobs: list[_Check] = []
    for index, item in enumerate(state):
        for piece in pieces:
            jobs += _plan(asker, index, item, piece)
    sizes = {job.asked.unit.key: _count(job) for job in jobs}
    outcomes = asker.send([job.asked for job in jobs],
                          lambda asked, text: parse_labels(text, "verdicts",
                                                           sizes[asked.unit.key], CHECK_LABELS))
    for job in jobs:
        _apply(job, outcomes[job.asked.unit.key])


def _count(job: _Check) -> int:
    claims = job.item.claims[job.piece.split(".")[0]] or []
    return min(CHUNK, len(claims) - job.start)


def _plan(asker: Asker, index: int, item: _Record, piece: str) -> list[_Check]:
    side, against = piece.split(".")
    claims = item.claims.get(side)
    if claims is None:
        return []  # extraction failed or was impossible: the metric says why
    if not claims:  # nothing to check: the verdicts come from where the (no) claims came from
        item.sources[piece] = item.sources.get(side, "judge")
        return []
    if against == "contexts":
        if claims and claims[0]["contexts"] is not None:
            item.sources[piece] = "record"
            return []
        if (reason := context_text_reason(item.record)) is not None:
            item.errors[piece] = reason  # ids alone: nothing to check the claims against
            return []
        for claim in claims:
            claim["contexts"] = {}
        evidence = [(c.id, [c.text]) for c in item.record.contexts]
    else:
        if claims and claims[0][against] is not None:
            item.sources[piece] = "record"
            return []
        texts = _evidence_text(item.record, against)
        if texts is None:
            item.errors[piece] = f"no {against} to check the claims of {_OWNER[side]} against"
            return []
        evidence = [(None, texts)]
    item.sources[piece] = "judge"
    query = [] if item.record.query is None else [item.record.query]
    jobs = []
    for context, texts in evidence:
        for start in range(0, len(claims), CHUNK):
            chunk = [claim["text"] for claim in claims[start:start + CHUNK]]
            asked = asker.ask(index, "check_claims",
                              {"query": query, "evidence": texts, "claims": chunk},
                              labels_schema("check_claims", "verdicts", len(chunk),
                                            CHECK_LABELS))
            jobs.append(_Check(asked, item, piece, start, context))
    return jobs


def _evidence_text(record: Record, against: str) -> list[str] | None:
    if against == "answer":
        return None if record.answer is None else [record.answer]
    return list(record.references) or None


def _apply(job: _Check, outcome: Outcome) -> None:
    side, against = job.piece.split(".")
    claims = job.item.claims[side] or []
    job.item.used.append(outcome)
    if not outcome.ok:
        what = f"context {job.context}" if job.context is not None else f"the {against}"
        job.item.errors.setdefault(
            job.piece, f"checking the claims of {_OWNER[side]} against {what}: {outcome.error}")
        return
    for offset, verdict in enumerate(outcome.value):
        claim = claims[job.start + offset]
        if job.context is None:
            claim[against] = verdict
        else:
            claim["contexts"][job.context] = verdict
