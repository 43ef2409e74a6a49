"""Claims, verdicts, nuggets and labels that a record brings itself (no request needed).

A record may carry ``claims``::

    "claims": {"answer":    [{"text": "...", "reference": "entailment",
                              "contexts": {"d1": "entailment", "d2": "neutral"}}, ...],
               "reference": [{"text": "...", "answer": "neutral", "contexts": ["d1"]}, ...]}

and ``nuggets``::

    "nuggets": [{"text": "...", "importance": "vital", "assignment": "support"}, ...]

A claim is a text, a list of texts (a RAGChecker triplet, joined with spaces), or an object with
``text`` and any verdicts: against the other text (``reference`` for the answer's claims,
``answer`` for the reference's), and against the contexts, as an object mapping every context id
of the record to a verdict or as the list of the ids of the contexts that entail it (the others
neutral). A verdict is ``entailment``, ``neutral`` or ``contradiction`` (any case; ``true`` and
``false`` read as entailment and neutral). A nugget is a text or an object with ``text`` and
optionally ``importance`` (``vital``/``okay``) and ``assignment``
(``support``/``partial_support``/``not_support``). Within one list a kind of verdict or label
is given for every item or for none: the judge supplies what is absent. In CSV the cell holds
the same JSON. Anything else is an :class:`~rageval.core.errors.InputError` naming the record
and the field, raised before any request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rageval.core.errors import InputError
from rageval.judge.claims.steps import ASSIGN_LABELS, CHECK_LABELS, IMPORTANCE_LABELS

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = ["SuppliedClaims", "SuppliedNuggets", "supplied_claims", "supplied_nuggets"]

_SIDES = {"answer": "reference", "reference": "answer"}  # side -> the text its claims face


@dataclass(frozen=True)
class SuppliedClaims:
    """One side's claims as given: texts, and verdicts where given (None: the judge checks)."""

    texts: tuple[str, ...]
    other: tuple[str, ...] | None  # verdict against the other text, per claim
    contexts: tuple[dict[str, str], ...] | None  # context id -> verdict, per claim


@dataclass(frozen=True)
class SuppliedNuggets:
    texts: tuple[str, ...]
    importance: tuple[str, ...] | None
    assignment: tuple[str, ...] | None


def supplied_claims(record: Record) -> dict[str, SuppliedClaims]:
    """The claims the record gives, by side (``answer``, ``reference``); {} when none."""
    raw = _field(record, "claims")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _error(record, "claims", "must be an object with 'answer' and/or 'reference'")
    unknown = sorted(set(raw) - set(_SIDES))
    if unknown:
        raise _error(record, f"claims.{unknown[0]}", "unknown side; use 'answer' or "
                     "'reference'")
    ids = [context.id for context in record.contexts]
    return {side: _side(record, side, raw[side], ids) for side in _SIDES if side in raw}


def _side(record: Record, side: str, items: Any, ids: list[str]) -> SuppliedClaims:
    where = f"claims.{side}"
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise _error(record, where, "must be a list of claims")
    other_key = _SIDES[side]
    texts, others, contexts = [], [], []
    for n, item in enumerate(items):
        at = f"{where}[{n}]"
        if isinstance(item, Mapping):
            unknown = sorted(set(item) - {"text", other_key, "contexts"})
            if unknown:
                raise _error(record, f"{at}.{unknown[0]}", f"unknown key; a claim of the "
                             f"{side} has 'text', '{other_key}' and 'contexts'")
            texts.append(_text(record, at, item.get("text")))
            others.append(None if other_key not in item
                          else _verdict(record, f"{at}.{other_key}", item[other_key]))
            contexts.append(None if "contexts" not in item
                            else _context_verdicts(record, f"{at}.contexts", item["contexts"],
                                                   ids))
        else:
            texts.append(_text(record, at, item))
            others.append(None)
            contexts.append(None)
    return SuppliedClaims(tuple(texts), _all_or_none(record, where, other_key, others),
                          _all_or_none(record, where, "contexts", contexts))


def supplied_nuggets(record: Record) -> SuppliedNuggets | None:
    """The nuggets the record gives, or None."""
    items = _field(record, "nuggets")
    if items is None:
        return None
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise _error(record, "nuggets", "must be a list of nuggets")
    texts, importance, assignment = [], [], []
    for n, item in enumerate(items):
        at = f"nuggets[{n}]"
        if isinstance(item, Mapping):
            unknown = sorted(set(item) - {"text", "importance", "assignment"})
            if unknown:
                raise _error(record, f"{at}.{unknown[0]}", "unknown key; a nugget has 'text', "
                             "'importance' and 'assignment'")
            texts.append(_text(record, at, item.get("text")))
            importance.append(_label(record, f"{at}.importance", item.get("importance"),
                                     IMPORTANCE_LABELS))
            assignment.append(_label(record, f"{at}.assignment", item.get("assignment"),
                                     ASSIGN_LABELS))
        else:
            texts.append(_text(record, at, item))
            importance.append(None)
            assignment.append(None)
    return SuppliedNuggets(tuple(texts), _all_or_none(record, "nuggets", "importance", importance),
                           _all_or_none(record, "nuggets", "assignment", assignment))


# ---- fields ----------------------------------------------------------------------------------


def _field(record: Record, name: str) -> Any:
    value = record.extra.get(name)
    if isinstance(value, str):  # a CSV cell holds the JSON
        try:
            return json.loads(value)
        except ValueError as error:
            raise _error(record, name, f"is not valid JSON: {error}") from None
    return value


def _text(record: Record, where: str, value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str) and value and all(
            isinstance(part, str) for part in value):
        value = " ".join(part.strip() for part in value)  # a triplet
    if not isinstance(value, str) or not value.strip():
        raise _error(record, where, "must be a non-empty text (or a list of texts)")
    return value.strip()


def _verdict(record: Record, where: str, value: Any) -> str:
    if isinstance(value, bool):
        return "entailment" if value else "neutral"
    if isinstance(value, str) and value.strip().lower() in CHECK_LABELS:
        return value.strip().lower()
    raise _error(record, where, f"must be one of {', '.join(CHECK_LABELS)} (or true/false), "
                 f"got {value!r}")


def _context_verdicts(record: Record, where: str, value: Any, ids: list[str]) -> dict[str, str]:
    # Context ids may be written as numbers in JSON, as in the record's own contexts.
    if isinstance(value, Sequence) and not isinstance(value, str):
        value = [_id(v) for v in value]
        unknown = [v for v in value if v not in ids]
        if unknown:
            raise _error(record, where, f"names {unknown[0]!r}, not a context id of the record")
        return {cid: "entailment" if cid in value else "neutral" for cid in ids}
    if isinstance(value, Mapping):
        value = {_id(k): v for k, v in value.items()}
        if set(value) != set(ids):
            stray = sorted(set(value) - set(ids))
            problem = (f"names {stray[0]!r}, not a context id of the record" if stray else
                       f"lacks context {sorted(set(ids) - set(value))[0]!r}")
            raise _error(record, where, f"{problem}: give a verdict for every context, or "
                         "the list of the contexts that entail the claim")
        return {cid: _verdict(record, f"{where}.{cid}", value[cid]) for cid in ids}
    raise _error(record, where, "must map every context id to a verdict, or list the ids of "
                 "the contexts that entail the claim")


def _id(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _label(record: Record, where: str, value: Any, labels: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in labels:
        return value.strip().lower()
    raise _error(record, where, f"must be one of {', '.join(labels)}, got {value!r}")


def _all_or_none(record: Record, where: str, what: str,
                 values: list[Any]) -> tuple[Any, ...] | None:
    given = [v is not None for v in values]
    if all(given) and values:
        return tuple(values)
    if any(given):
        missing = given.index(False)
        raise _error(record, f"{where}[{missing}]", f"has no '{what}' while others do: give it "
                     "for every item or for none (the judge then supplies them all)")
    return None


def _error(record: Record, where: str, message: str) -> InputError:
    return InputError(f"record {record.id!r}: {message}", field=where)
