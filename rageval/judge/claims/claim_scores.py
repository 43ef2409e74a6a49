"""Claim-level metrics (RAGChecker's): pure formulas from one record's claim verdicts.

Metric card. The answer ("response" in RAGChecker) and the reference ("gt_answer") are split into
claims; each claim is checked against the other text and against every context. A verdict is
one of ``entailment``, ``neutral``, ``contradiction``, and only ``entailment`` counts as true
(RAGChecker's ``to_bool``). Notation: A = the answer's claims, R = the reference's claims,
C = the record's contexts; "a in ref" = the reference entails claim a, "r in ans" = the answer
entails claim r, "x in c" = context c entails claim x. All values are on 0-1 (RAGChecker prints
the mean over records x100, rounded to 0.1).

Overall (RAGChecker ``overall_metrics``):

- ``precision``: mean over a in A of [a in ref].
- ``recall``: mean over r in R of [r in ans].
- ``f1``: 2pr / (p + r); 0 when p or r is 0 (a real value, as in RAGChecker).

Retriever (``retriever_metrics``):

- ``claim_recall``: mean over r in R of [r in some c in C].
- ``context_precision``: mean over c in C of [c entails some r in R].

Generator (``generator_metrics``):

- ``context_utilization``: #{r: r in some c and r in ans} / #{r: r in some c}.
- ``noise_sensitivity.relevant`` (RAGChecker ``noise_sensitivity_in_relevant``): mean over a in A
  of [a not in ref and a in some relevant c], where relevant = entails some r in R.
- ``noise_sensitivity.irrelevant`` (``noise_sensitivity_in_irrelevant``): mean over a in A of
  [a not in ref and a in some irrelevant c and in no relevant c].
- ``hallucination``: mean over a in A of [a in no c and a not in ref].
- ``self_knowledge``: mean over a in A of [a in no c and a in ref].
- ``faithfulness``: mean over a in A of [a in some c].

Each value is computed with the numpy operations of RAGChecker 0.1.9's ``computation.py``, in
the same order, so it is bit-for-bit RAGChecker's.

Unscored is not zero. Where RAGChecker scores 0 because there is nothing to average over, the
record is unscored here with a reason that says so: the answer has no claims (precision, noise
sensitivity, hallucination, self_knowledge, faithfulness), the reference has no claims (recall,
claim_recall, context_precision, context_utilization, noise sensitivity), the record has no
contexts (every metric that reads the contexts), no reference claim is entailed by any context
(context_utilization's 0/0); f1 is unscored when precision or recall is. A metric is also
unscored when a verdict it needs is missing (``details["errors"]`` says why, when it knows).

Departures: the claims are whatever the extraction gives (free text here, RAGChecker's are
triplets), and the checker's three labels (lower case here, ``Entailment`` in RAGChecker) are
kept in the details though only entailment counts; any other label is refused (ValueError).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["CLAIM_METRICS", "ORACLE_NAMES", "PIECES", "claim_score"]

CLAIM_METRICS: tuple[str, ...] = (
    "precision", "recall", "f1", "claim_recall", "context_precision", "context_utilization",
    "noise_sensitivity.relevant", "noise_sensitivity.irrelevant", "hallucination",
    "self_knowledge", "faithfulness",
)

ORACLE_NAMES: dict[str, str] = {
    **{name: name for name in CLAIM_METRICS},
    "noise_sensitivity.relevant": "noise_sensitivity_in_relevant",
    "noise_sensitivity.irrelevant": "noise_sensitivity_in_irrelevant",
}

# The pieces of verdicts (RAGChecker's intermediate results) and the arrays they stand for.
_A_REF = "answer_claims.reference"  # answer2response: (answer claims,)
_A_CTX = "answer_claims.contexts"  # retrieved2response: (answer claims, contexts)
_R_ANS = "reference_claims.answer"  # response2answer: (reference claims,)
_R_CTX = "reference_claims.contexts"  # retrieved2answer: (reference claims, contexts)

# RAGChecker's METRIC_REQUIREMENTS, in pieces.
PIECES: dict[str, tuple[str, ...]] = {
    "precision": (_A_REF,),
    "recall": (_R_ANS,),
    "f1": (_A_REF, _R_ANS),
    "claim_recall": (_R_CTX,),
    "context_precision": (_R_CTX,),
    "context_utilization": (_R_CTX, _R_ANS),
    "noise_sensitivity.relevant": (_A_CTX, _A_REF, _R_CTX),
    "noise_sensitivity.irrelevant": (_A_CTX, _A_REF, _R_CTX),
    "hallucination": (_A_CTX, _A_REF),
    "self_knowledge": (_A_CTX, _A_REF),
    "faithfulness": (_A_CTX,),
}

_LABELS = ("entailment", "neutral", "contradiction")

_NOT_EXTRACTED = {
    "answer_claims": "the answer's claims were not extracted",
    "reference_claims": "the reference's claims were not extracted",
}
_NOT_CHECKED = {
    _A_REF: "the answer's claims were not checked against the reference",
    _A_CTX: "the answer's claims were not checked against the contexts",
    _R_ANS: "the reference's claims were not checked against the answer",
    _R_CTX: "the reference's claims were not checked against the contexts",
}

# What must not be empty, in the order RAGChecker tests it, and the reason when it is.
_EMPTY = {
    "answer": "the answer has no claims (RAGChecker scores 0)",
    "reference": "the reference has no claims (RAGChecker scores 0)",
    "contexts": "the record has no contexts (RAGChecker scores 0)",
}
_ANSWER_SIDE = ("answer", "contexts")
_REFERENCE_SIDE = ("reference", "contexts")
_NEEDS: dict[str, tuple[str, ...]] = {
    "precision": ("answer",),
    "recall": ("reference",),
    "claim_recall": _REFERENCE_SIDE,
    "context_precision": _REFERENCE_SIDE,
    "context_utilization": _REFERENCE_SIDE,
    "noise_sensitivity.relevant": ("answer", "contexts", "reference"),
    "noise_sensitivity.irrelevant": ("answer", "contexts", "reference"),
    "hallucination": _ANSWER_SIDE,
    "self_knowledge": _ANSWER_SIDE,
    "faithfulness": _ANSWER_SIDE,
}
_NOTHING_RECALLED = "no reference claim is entailed by any context: 0/0 (RAGChecker scores 0)"

_Arrays = Mapping[str, np.ndarray]


def claim_score(details: Mapping[str, Any], metric: str) -> tuple[float, str | None]:
    """One record's value of ``metric`` (nan when unscored) and why it is unscored (else None)."""
    if metric not in PIECES:
        raise ValueError(f"unknown claim metric {metric!r}; known: {', '.join(CLAIM_METRICS)}")
    if metric == "f1":
        return _f1(details)
    for piece in PIECES[metric]:
        if (reason := _missing(details, piece)) is not None:
            return math.nan, reason
    for part in _NEEDS[metric]:
        if _size(details, part) == 0:
            return math.nan, _EMPTY[part]
    value = _FORMULAS[metric]({piece: _array(details, piece) for piece in PIECES[metric]})
    if value is None:
        return math.nan, _NOTHING_RECALLED
    return float(value), None


def _f1(details: Mapping[str, Any]) -> tuple[float, str | None]:
    precision, reason = claim_score(details, "precision")
    if reason is not None:
        return math.nan, reason
    recall, reason = claim_score(details, "recall")
    if reason is not None:
        return math.nan, reason
    # Back to numpy scalars, as RAGChecker holds them (the IEEE arithmetic is the same anyway).
    p, r = np.float64(precision), np.float64(recall)
    if p > 0 and r > 0:
        return float(2 * p * r / (p + r)), None
    return 0.0, None


def _missing(details: Mapping[str, Any], piece: str) -> str | None:
    """Why ``piece`` cannot be read from ``details``, or None when it can."""
    side, key = piece.split(".")
    claims = details.get(side)
    if _available(claims, key, details.get("contexts")):
        return None
    errors = details.get("errors") or {}
    generic = _NOT_EXTRACTED[side] if claims is None else _NOT_CHECKED[piece]
    return errors.get(piece) or errors.get(side) or generic


def _available(claims: Any, key: str, contexts: Sequence[str] | None) -> bool:
    if not isinstance(claims, list | tuple):
        return False
    if key != "contexts":
        return all(claim.get(key) is not None for claim in claims)
    if contexts is None:  # no ids to read the verdicts by
        return False
    return all(
        isinstance(verdicts := claim.get("contexts"), Mapping)
        and all(verdicts.get(doc) is not None for doc in contexts)
        for claim in claims
    )


def _size(details: Mapping[str, Any], part: str) -> int:
    key = {"answer": "answer_claims", "reference": "reference_claims"}.get(part, part)
    return len(details[key])


def _array(details: Mapping[str, Any], piece: str) -> np.ndarray:
    """The piece as RAGChecker's ``to_bool`` gives it: a bool vector or (claims, contexts)."""
    side, key = piece.split(".")
    claims = details[side]
    if key != "contexts":
        return np.array([_truth(claim[key]) for claim in claims], dtype=bool)
    contexts = details["contexts"]
    rows = [[_truth(claim["contexts"][doc]) for doc in contexts] for claim in claims]
    return np.array(rows, dtype=bool).reshape(len(claims), len(contexts))


def _truth(verdict: Any) -> bool:
    # A label outside the three would silently count as "not entailed"; refuse it instead.
    if verdict not in _LABELS:
        raise ValueError(f"unknown verdict {verdict!r}; expected one of {', '.join(_LABELS)}")
    return verdict == "entailment"


# The formulas: RAGChecker's computation.py, operation for operation.
def _claim_recall(a: _Arrays) -> np.floating:
    return np.mean(np.max(a[_R_CTX], axis=1))


def _context_precision(a: _Arrays) -> np.floating:
    return np.mean(np.max(a[_R_CTX], axis=0))


def _context_utilization(a: _Arrays) -> np.floating | None:
    claim_recalled = np.max(a[_R_CTX], axis=1)
    if not np.sum(claim_recalled) > 0:
        return None  # 0/0
    claim_used = claim_recalled & a[_R_ANS]
    return np.sum(claim_used) / np.sum(claim_recalled)


def _noise_sensitivity(a: _Arrays, relevant: bool) -> np.floating:
    relevant_retrieved = np.max(a[_R_CTX], axis=0, keepdims=True)
    relevant_faithful = np.max(relevant_retrieved & a[_A_CTX], axis=1)
    incorrect = ~a[_A_REF]
    if relevant:
        return np.mean(relevant_faithful & incorrect)
    irrelevant_retrieved = ~np.max(a[_R_CTX], axis=0, keepdims=True)
    irrelevant_faithful = np.max(irrelevant_retrieved & a[_A_CTX], axis=1)
    irrelevant_faithful &= ~relevant_faithful  # exclusive with the relevant ones
    return np.mean(irrelevant_faithful & incorrect)


def _unfaithfulness(a: _Arrays, correct: bool) -> np.floating:
    unfaithful = ~np.max(a[_A_CTX], axis=1)
    return np.mean(unfaithful & (a[_A_REF] if correct else ~a[_A_REF]))


def _faithfulness(a: _Arrays) -> np.floating:
    return np.mean(np.max(a[_A_CTX], axis=1))


_FORMULAS: dict[str, Callable[[_Arrays], np.floating | None]] = {
    "precision": lambda a: np.mean(a[_A_REF]),
    "recall": lambda a: np.mean(a[_R_ANS]),
    "claim_recall": _claim_recall,
    "context_precision": _context_precision,
    "context_utilization": _context_utilization,
    "noise_sensitivity.relevant": lambda a: _noise_sensitivity(a, relevant=True),
    "noise_sensitivity.irrelevant": lambda a: _noise_sensitivity(a, relevant=False),
    "hallucination": lambda a: _unfaithfulness(a, correct=False),
    "self_knowledge": lambda a: _unfaithfulness(a, correct=True),
    "faithfulness": _faithfulness,
}
