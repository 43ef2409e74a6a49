"""From decoded JSON-form objects to the records a run scores: records on their own, and
conversations, whose turns are scored as records.

A conversation is an object with an ``id`` and ``turns``, a list of turn objects in order::

    {"id": "conv-7", "reference": "the refund is approved",
     "turns": [{"query": "...", "contexts": [...], "answer": "...", "tool_calls": [...]},
               {"id": "followup", "query": "...", "rewritten_query": "...", "answer": "..."}]}

Each turn holds the fields of a record (``query`` required; ``contexts``, ``answer``,
``reference``, ``judgments``, ``tool_calls``, ``reference_tool_calls``, ``claims``,
``nuggets``, ``rewritten_query`` and any other key as a record has them) and is scored as the
record ``<conversation id>#<turn>``: its 1-based position, or its own ``id`` when it gives one
(unique within the conversation). The conversation itself may give a ``reference`` (what
resolving the user's need looks like) and ``reference_tool_calls`` (the calls expected over all
its turns, for ``tools:*(scope=conversation)``), and keeps any other key in
:attr:`~rageval.core.records.model.Conversation.extra`; the fields of a turn belong to turns.
A problem in a turn names the conversation, the turn and the field (``turns[1].query``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from rageval.core.errors import InputError
from rageval.core.records.checks import FieldError, expected, identifier, optional_str
from rageval.core.records.ids import IdCheck
from rageval.core.records.model import (
    Conversation,
    Record,
    check_reserved,
    record_object,
)
from rageval.core.records.tools import validate_tool_calls

__all__ = ["conversation_object", "validate_records"]

_CONVERSATION_KEYS = frozenset({"id", "turns", "reference", "reference_tool_calls"})
# Record fields a conversation leaves to its turns (a conversation's own are above).
_TURN_FIELDS = ("query", "contexts", "answer", "judgments", "tool_calls", "rewritten_query",
                "claims", "nuggets")


def validate_records(raw: Iterable[tuple[int, Any]], source: str, unit: str,
                     ids: IdCheck | None = None, *, built: bool = False,
                     plain: Callable[[Any], str | None] | None = None) -> Iterator[Record]:
    """Validate ``(line, object)`` pairs into records (a conversation into its turns, one
    record each); checks duplicate ids and emptiness. With ``built``, for a reader that makes
    some records itself from fields it checked
    (:func:`~rageval.core.records.model.checked_record`), an object that is a :class:`Record`
    already passes on as it is, its id checked as every other; otherwise a :class:`Record` is
    refused as any object that is not a record's JSON. With ``plain``, for a reader that
    keeps only some fields of the records: ``plain(object)`` is the id of an object whose
    fields it checked and kept itself (its id checked here as every other, no record made
    of it), or None for the object to be validated here as a record.

    A record is yielded as soon as it is valid. An id used twice within a few thousand records
    is refused at once; one used long before is refused when its chunk of ids is checked
    against every earlier id (kept as digests, :class:`~rageval.core.records.ids.SeenIds`),
    at most a few thousand records later, and always before a later problem of the file;
    past the ids kept in memory, a clash among the later ones is refused when the input ends.
    ``ids`` (default: a new one) is the check, for a reader that flushes it at its own
    boundaries (a window about to be scored)."""
    ids = IdCheck(source, unit) if ids is None else ids
    lines = iter(raw)
    while True:
        try:
            pair = next(lines, None)
        except InputError:
            ids.finish()  # a duplicate before the unreadable line is the first problem
            raise
        if pair is None:
            break
        line, item = pair
        if plain is not None:
            own = plain(item)
            if own is not None:
                ids.add(own, line)
                continue
        try:
            if type(item) is dict and item.get("turns") is None:
                records: list[Record] = [record_object(item)]
            elif built and type(item) is Record:  # made from checked fields (checked_record)
                records = [item]
            else:
                records = _records(item)
        except FieldError as error:
            ids.finish()
            message = error.message if unit != "row" else f"{error.message} (row {line})"
            raise InputError(message, path=source, line=line, field=error.field) from None
        if records[0].conversation is not None:  # its own line of results has its id
            ids.add(records[0].conversation.id, line)
        for record in records:
            ids.add(record.id, line)
            yield record
    ids.finish()
    if not ids.count:
        raise InputError("contains no records", path=source)


def _records(item: Any) -> list[Record]:
    if isinstance(item, Mapping) and item.get("turns") is not None:
        return conversation_object(item).records()
    return [record_object(item)]


def conversation_object(item: Mapping[str, Any]) -> Conversation:
    """Validate one decoded conversation object; raises :class:`FieldError`."""
    if "id" not in item:
        raise FieldError("missing required field 'id'", "id")
    conversation = identifier(item["id"], "id")
    where = f"conversation {conversation!r}"
    for key in _TURN_FIELDS:
        if item.get(key) is not None:  # a table's row has every column, null where unset
            raise FieldError(f"{where}: {key!r} belongs to a turn (turns[i].{key}), not to "
                             "the conversation", key)
    turns = item["turns"]
    if not isinstance(turns, list | tuple):
        raise expected("a list of turn objects", turns, "turns").within("", where)
    if not turns:
        raise FieldError(f"{where}: a conversation needs at least one turn", "turns")
    records: list[Record] = []
    positions: dict[str, int] = {}
    for index, turn in enumerate(turns):
        prefix, here = f"turns[{index}]", f"{where}, turn {index + 1}"
        try:
            record = _turn(conversation, turn, index)
        except FieldError as error:
            raise error.within(prefix, here) from None
        first = positions.setdefault(record.id, index)
        if first != index:
            own = record.id[len(conversation) + 1:]
            raise FieldError(f"{here}: duplicate turn id {own!r} (turn {first + 1} has it)",
                             f"{prefix}.id")
        records.append(record)
    references = _conversation_reference(item.get("reference"), where)
    try:
        expected_calls = validate_tool_calls(item.get("reference_tool_calls"),
                                             "reference_tool_calls")
    except FieldError as error:
        raise error.within("", where) from None
    check_reserved(item)
    extra = {key: value for key, value in item.items()
             if key not in _CONVERSATION_KEYS and key not in _TURN_FIELDS}
    for key in extra:
        if not isinstance(key, str):
            raise expected("string keys", key, None)
    return Conversation(conversation, tuple(records), references, MappingProxyType(extra),
                        expected_calls)


def _turn(conversation: str, turn: Any, index: int) -> Record:
    if not isinstance(turn, Mapping):
        raise expected("a turn object", turn, None)
    if turn.get("turns") is not None:
        raise FieldError("a turn cannot hold turns of its own", "turns")
    if turn.get("query") is None:
        raise FieldError("missing required field 'query' (the user's message)", "query")
    own = identifier(turn["id"], "id") if turn.get("id") is not None else str(index + 1)
    optional_str(turn.get("rewritten_query"), "rewritten_query")
    return record_object({**turn, "id": f"{conversation}#{own}"})


def _conversation_reference(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise expected("a string or a non-empty list of strings", value,
                   "reference").within("", where)
