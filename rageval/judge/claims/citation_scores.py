"""Citation recall and precision (ALCE: Gao et al., 2023, "Enabling Large Language Models to
Generate Text with Citations"), from the judge's verdicts on an answer's statements.

Metric card
-----------
Names: ``citations:recall`` and ``citations:precision``. Scale 0-1 per record (ALCE reports
the mean over items times 100).

A statement is a sentence of the answer with its citation markers removed; its citations are
the record's contexts it names, at most 3 (ALCE's ``at_most_citations`` default), see
:mod:`rageval.judge.claims.citation_text`. A statement is *supported* when its cited passages,
shown together, entail it. ALCE asks Google's TRUE NLI model (T5-11B) "premise: passages
hypothesis: statement"; rageval asks an LLM judge whether the passages together entail the
statement, and its "entailed" verdict stands for TRUE's "1". A statement with no valid
citation, or with any citation naming no context, is unsupported without asking (ALCE's
``joint_entail = 0``).

* recall = (number of supported statements) / (number of statements).
* precision = credited citations / counted citations. Only statements whose citations are all
  valid count their citations. A supported statement citing one passage credits it; an
  unsupported one credits none. A supported statement citing several passages credits each
  cited passage c unless c is unnecessary: c alone does not entail the statement while the
  other cited passages, without c, still do (ALCE's conditions A and B).

Unscored records (value NaN and a reason):

* the answer was not read into statements (the reason given in ``errors["statements"]``);
* the answer has no statements: ALCE skips such an item altogether;
* a statement that needed the judge has no verdict (ALCE has no such case: its NLI model
  always answers);
* precision only: a verdict on a cited passage alone, or on the others without it, is missing
  for a statement that needs it;
* precision only: no statement has all-valid citations, so nothing is counted; ALCE scores
  this 0 (``entail_prec / total_citations if total_citations > 0 else 0``), rageval leaves it
  unscored since there is no citation to be precise about. Its recall is scored (0).

Departures from ALCE, besides the judge and the two cases above: citations are read by id as
well as by rank, every token of ``[1, 2]`` counts, ``[0]`` is invalid rather than the last
passage, and a passage cited twice in a statement counts once (ALCE counts it twice, and a
duplicated passage that is not sufficient alone is then judged unnecessary, since the other
copy remains "without" it). Statements come from an untrained Punkt tokenizer.

Per-record details (fixed format)::

    {"statements": [{"text": str, "cites": [ctx ids], "invalid": [tokens],
                     "supported": bool | None,
                     "alone": {ctx_id: bool} | None,     # supported and > 1 cite only
                     "without": {ctx_id: bool} | None}], # for the cites whose alone is False
     "errors": {piece: reason}}  # pieces: "statements", "supported", "alone", "without"
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from rageval.judge.claims.citation_text import Statement

__all__ = [
    "CITATION_METRICS",
    "PIECES",
    "Check",
    "checkable",
    "citation_score",
    "needed_checks",
    "statement_entry",
]

CITATION_METRICS = ("recall", "precision")
PIECES = ("statements", "supported", "alone", "without")

Entry = Mapping[str, Any]


class Check(NamedTuple):
    """One judge question: do ``passages`` (context ids, shown together) entail the statement?
    ``piece`` says where the verdict goes: "supported", or "alone"/"without" keyed by
    ``ctx_id``."""

    piece: str
    ctx_id: str | None
    passages: tuple[str, ...]


def checkable(entry: Entry) -> bool:
    """Whether the statement goes to the judge at all: some valid citation and no invalid one.
    Only such statements count their citations in precision."""
    return bool(entry.get("cites")) and not entry.get("invalid")


def statement_entry(statement: Statement) -> dict[str, Any]:
    """The details entry of a statement before any judging: ``supported`` is already False
    for a statement that cannot be checked, None (to ask) otherwise."""
    entry: dict[str, Any] = {
        "text": statement.text,
        "cites": list(statement.cites),
        "invalid": list(statement.invalid),
        "supported": None,
        "alone": None,
        "without": None,
    }
    if not checkable(entry):
        entry["supported"] = False
    return entry


def needed_checks(entry: Entry, metric: str = "precision") -> list[Check]:
    """The judge questions that can be asked now for this statement and are still unanswered.
    Call again after filling in the answers: "alone" comes after "supported", "without" after
    "alone". Recall needs only "supported"."""
    _check_metric(metric)
    if not checkable(entry):
        return []
    cites = tuple(entry["cites"])
    supported = entry.get("supported")
    if supported is None:
        return [Check("supported", None, cites)]
    if metric == "recall" or not supported or len(cites) < 2:
        return []
    alone = entry.get("alone") or {}
    without = entry.get("without") or {}
    checks = [Check("alone", c, (c,)) for c in cites if alone.get(c) is None]
    checks += [Check("without", c, tuple(o for o in cites if o != c))
               for c in cites if alone.get(c) is False and without.get(c) is None]
    return checks


def _check_metric(metric: str) -> None:
    if metric not in CITATION_METRICS:
        raise ValueError(f"unknown citation metric {metric!r}; expected one of {CITATION_METRICS}")


def _undecided(errors: Mapping[str, str], piece: str, what: str) -> tuple[float, str]:
    # A failed round stops the later ones: its reason is the one that explains the gap.
    earlier = next((errors[p] for p in PIECES if p in errors), None)
    return math.nan, errors.get(piece) or earlier or f"the judge did not decide {what}"


def citation_score(details: Mapping[str, Any], metric: str) -> tuple[float, str | None]:
    """The record's citation recall or precision in [0, 1] with None, or NaN with the reason
    it is unscored. ``details`` is the per-record format in the module docstring."""
    _check_metric(metric)
    errors = details.get("errors") or {}
    statements = details.get("statements")
    if statements is None:
        return math.nan, errors.get("statements") or "the answer was not read into statements"
    if not statements:
        return math.nan, "the answer has no statements (ALCE skips such an answer)"
    if metric == "recall":
        return _recall(statements, errors)
    return _precision(statements, errors)


def _recall(statements: Sequence[Entry], errors: Mapping[str, str]) -> tuple[float, str | None]:
    supported = 0
    for number, entry in enumerate(statements, 1):
        if not checkable(entry):
            continue  # unsupported without asking: adds 0
        verdict = entry.get("supported")
        if verdict is None:
            return _undecided(errors, "supported", f"whether statement {number} is supported")
        supported += bool(verdict)
    return supported / len(statements), None


def _precision(
    statements: Sequence[Entry], errors: Mapping[str, str]
) -> tuple[float, str | None]:
    credited = counted = 0
    for number, entry in enumerate(statements, 1):
        if not checkable(entry):
            continue  # ALCE counts no citation of a statement with an invalid one
        cites = list(entry["cites"])
        counted += len(cites)
        verdict = entry.get("supported")
        if verdict is None:
            return _undecided(errors, "supported", f"whether statement {number} is supported")
        if not verdict:
            continue
        if len(cites) == 1:
            credited += 1
            continue
        necessary = _necessary_citations(entry, cites, number, errors)
        if isinstance(necessary, tuple):
            return necessary
        credited += necessary
    if counted == 0:
        return math.nan, ("the answer cites no context (no statement has only valid "
                          "citations); ALCE scores 0")
    return credited / counted, None


def _necessary_citations(
    entry: Entry, cites: list[str], number: int, errors: Mapping[str, str]
) -> int | tuple[float, str]:
    """How many citations of a supported multi-citation statement are necessary, or the
    unscored result when a verdict it needs is missing."""
    alone = entry.get("alone") or {}
    without = entry.get("without") or {}
    necessary = 0
    for ctx in cites:
        sufficient = alone.get(ctx)
        if sufficient is None:
            return _undecided(errors, "alone",
                              f"whether context {ctx} alone supports statement {number}")
        if sufficient:
            necessary += 1
            continue
        others_suffice = without.get(ctx)
        if others_suffice is None:
            return _undecided(errors, "without", f"whether statement {number} is supported "
                              f"without context {ctx}")
        necessary += not others_suffice
    return necessary
