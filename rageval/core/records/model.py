"""The record model: :class:`Record` and :class:`Context`, and building them from JSON.

:func:`validate_records` turns decoded JSON-form objects (whatever file format they were read
from) into records, checking every field; a problem in one record is a :class:`FieldError`
naming the field (a dotted path such as ``contexts[2].id``), to which the file and the line
are added in the :class:`~rageval.core.errors.InputError` raised. The JSON form is described
in :mod:`rageval.core.records`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from rageval.core.errors import UsageError
from rageval.core.outputs.surrogates import (
    LONE_SURROGATES,
    has_lone_surrogates,
    repaired,
    unicode_problem,
)
from rageval.core.records.checks import (
    FieldError,
    expected,
    identifier,
    is_integer,
    optional_str,
)
from rageval.core.records.tools import ToolCall, validate_tool_calls

__all__ = ["CONTEXTS_WITHOUT_TEXT", "MAX_GRADE", "Context", "Conversation", "FieldError", "Record",
           "TraceNote", "check_reserved", "checked_record", "plain_fields", "record_object",
           "validate_judgments", "with_judgments"]

_RECORD_KEYS = frozenset({"id", "query", "contexts", "answer", "reference", "judgments",
                          "tool_calls", "reference_tool_calls", "turns"})
_CONTEXT_KEYS = frozenset({"id", "text", "score"})

_EMPTY: Mapping[str, Any] = MappingProxyType({})

#: The extra field of a record read from traces whose retrieval documents were recorded
#: without their content, its value (a :class:`TraceNote`) saying what the trace recorded: the
#: metrics that read the contexts' text leave such a record unscored
#: (:func:`~rageval.core.metric.context_text_reason`). Reserved: a records file that sets it is
#: refused, so that no column of a user's file can switch those metrics off.
CONTEXTS_WITHOUT_TEXT = "contexts_without_text"


class TraceNote(str):
    """A note a reader of traces leaves among a record's extra fields: text (written out as
    any string), but never a value decoded from a records file, whose strings are plain
    :class:`str`; the record validation lets only this type through a reserved field."""

    __slots__ = ()


def _empty_mapping() -> Mapping[str, Any]:
    return _EMPTY


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of ``value`` (``value`` itself when already read-only)."""
    if type(value) is MappingProxyType:
        return value
    return MappingProxyType(dict(value)) if value else _EMPTY


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    """One retrieved context (passage), in rank order within its record."""

    id: str
    text: str
    score: float | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        metadata = _frozen_mapping(self.metadata)
        if metadata is not self.metadata:
            object.__setattr__(self, "metadata", metadata)
        if metadata and not _CONTEXT_KEYS.isdisjoint(metadata):
            clash = sorted(_CONTEXT_KEYS.intersection(metadata))
            raise UsageError(f"context metadata must not use the reserved keys {clash}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this context (metadata keys at the top level)."""
        out: dict[str, Any] = {"id": self.id, "text": self.text}
        if self.score is not None:
            out["score"] = self.score
        if self.metadata:
            out.update(self.metadata)
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One RAG interaction to evaluate. See :mod:`rageval.core.records` for the JSON form."""

    id: str
    query: str | None = None
    contexts: tuple[Context, ...] = ()
    answer: str | None = None
    references: tuple[str, ...] = ()
    judgments: Mapping[str, int] | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=_empty_mapping)
    # The calls the system made (None: not recorded) and those expected of it (None: none
    # given): rageval.core.records.tools.
    tool_calls: tuple[ToolCall, ...] | None = None
    reference_tool_calls: tuple[ToolCall, ...] | None = None
    # A turn of a conversation: the conversation (every turn of it) and this turn's 1-based
    # position in it; None and 0 for a record on its own.
    conversation: Conversation | None = dataclasses.field(default=None, repr=False)
    turn: int = 0

    def __post_init__(self) -> None:
        if type(self.contexts) is not tuple:
            object.__setattr__(self, "contexts", tuple(self.contexts))
        if type(self.references) is not tuple:
            object.__setattr__(self, "references", tuple(self.references))
        if self.judgments is not None and type(self.judgments) is not MappingProxyType:
            object.__setattr__(self, "judgments", MappingProxyType(dict(self.judgments)))
        extra = _frozen_mapping(self.extra)
        if extra is not self.extra:
            object.__setattr__(self, "extra", extra)
        if extra and not _RECORD_KEYS.isdisjoint(extra):
            clash = sorted(_RECORD_KEYS.intersection(extra))
            raise UsageError(f"record extra must not use the reserved keys {clash}")

    @property
    def reference(self) -> str | None:
        """The first reference answer, or ``None`` when there is none."""
        return self.references[0] if self.references else None

    @property
    def history(self) -> tuple[Record, ...]:
        """The turns before this one in its conversation (none for a record on its own); for
        the record standing for a whole conversation (``turn`` 0), every turn."""
        if self.conversation is None:
            return ()
        if self.turn == 0:
            return self.conversation.turns
        return self.conversation.turns[: self.turn - 1]

    def has(self, field: str) -> bool:
        """Whether the record has ``field`` (``query``, ``contexts``, ``answer``,
        ``reference``, ``judgments``, ``tool_calls``, ``reference_tool_calls`` or
        ``conversation``), as metrics need it: an empty list of contexts or references is
        none; empty judgments are judgments (every context unjudged), and an empty list of
        tool calls is calls recorded (none made)."""
        if field == "contexts":
            return bool(self.contexts)
        if field in ("reference", "references"):
            return bool(self.references)
        if field in _PRESENT_UNLESS_NONE:
            return getattr(self, field) is not None
        raise ValueError(f"unknown record field {field!r}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this record; loading it again gives an equal record (a turn of a
        conversation gives itself as a record on its own: :meth:`Conversation.to_dict` gives
        the conversation)."""
        out: dict[str, Any] = {"id": self.id}
        if self.query is not None:
            out["query"] = self.query
        if self.contexts:
            out["contexts"] = [context.to_dict() for context in self.contexts]
        if self.answer is not None:
            out["answer"] = self.answer
        if len(self.references) == 1:
            out["reference"] = self.references[0]
        elif self.references:
            out["reference"] = list(self.references)
        if self.judgments is not None:
            out["judgments"] = dict(self.judgments)
        if self.tool_calls is not None:
            out["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.reference_tool_calls is not None:
            out["reference_tool_calls"] = [call.to_dict() for call in self.reference_tool_calls]
        if self.extra:
            out.update(self.extra)
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation: its id and its turns in order, each a record of its own (id
    ``<conversation>#<turn>``, without the link back that the records scored carry), and what
    it gives for the whole conversation (``reference``: what resolving the user's need looks
    like; ``reference_tool_calls``: the calls expected over all its turns; other keys in
    ``extra``)."""

    id: str
    turns: tuple[Record, ...]
    references: tuple[str, ...] = ()
    extra: Mapping[str, Any] = dataclasses.field(default_factory=_empty_mapping)
    # The tool calls expected over the whole conversation (None: none given), for the tool
    # metrics that score conversations whole (ragas' multi-turn samples carry these).
    reference_tool_calls: tuple[ToolCall, ...] | None = None

    def records(self) -> list[Record]:
        """The turns as the records a run scores, each knowing its conversation and place."""
        return [dataclasses.replace(turn, conversation=self, turn=position)
                for position, turn in enumerate(self.turns, 1)]

    def as_record(self) -> Record:
        """The conversation as one record (``turn`` 0), for the metrics that grade it whole:
        its id, its reference and its other keys; its turns through ``conversation``."""
        made = [turn.tool_calls for turn in self.turns if turn.tool_calls is not None]
        calls = tuple(call for calls in made for call in calls) if made else None
        return Record(self.id, references=self.references, extra=self.extra,
                      tool_calls=calls, reference_tool_calls=self.reference_tool_calls,
                      conversation=self, turn=0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the conversation; loading it again gives an equal one."""
        turns = []
        prefix = f"{self.id}#"
        for position, turn in enumerate(self.turns, 1):
            item = turn.to_dict()
            own = item.pop("id")[len(prefix):]
            turns.append(item if own == str(position) else {"id": own, **item})
        out: dict[str, Any] = {"id": self.id, "turns": turns}
        if len(self.references) == 1:
            out["reference"] = self.references[0]
        elif self.references:
            out["reference"] = list(self.references)
        if self.reference_tool_calls is not None:
            out["reference_tool_calls"] = [call.to_dict() for call in self.reference_tool_calls]
        out.update(self.extra)
        return out


_PRESENT_UNLESS_NONE = frozenset({"query", "answer", "judgments", "tool_calls",
                                  "reference_tool_calls", "conversation"})


# --------------------------------------------------------------------------------------------
# Validation of one record (format independent)
# --------------------------------------------------------------------------------------------


def _score(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number):
            return number
    raise expected("a finite number", value, field)


# Grades are stored as int64 and used as exponents (2^g - 1 gains): keep them in a sane range.
MAX_GRADE = 1000


def _grade(value: Any, field: str) -> int:
    if type(value) is int:
        grade = value
    elif is_integer(value) or (isinstance(value, float) and value.is_integer()):
        grade = int(value)
    else:
        raise expected("an integer grade", value, field)
    if abs(grade) > MAX_GRADE:
        raise FieldError(f"grade {grade} is outside -{MAX_GRADE}..{MAX_GRADE}", field)
    return grade


def validate_judgments(value: Any, field: str = "judgments") -> Mapping[str, int] | None:
    """Graded judgments (doc id -> integer grade) found at ``field``, read-only; ``None`` when
    absent. Raises :class:`FieldError`."""
    if value is None:
        return None
    if type(value) is not dict and not isinstance(value, Mapping):
        raise expected("an object mapping doc ids to integer grades", value, field)
    grades: dict[str, int] = {}
    for doc, grade in value.items():
        if not isinstance(doc, str) or not doc:
            raise expected("non-empty string doc ids", doc, field)
        grades[doc] = _grade(grade, f"{field}.{doc}")
    return MappingProxyType(grades)


def _references(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and value:
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise expected("a string", item, f"reference[{index}]")
        return tuple(value)
    raise expected("a string or a non-empty list of strings", value, "reference")


def _context_object(item: Mapping[str, Any], index: int) -> Context:
    try:
        context_id = item["id"]
        text = item["text"]
    except KeyError as missing:
        name = missing.args[0]
        raise FieldError(f"missing required field {name!r}", f"contexts[{index}].{name}") from None
    if type(context_id) is not str or not context_id or not context_id.isascii():
        context_id = identifier(context_id, f"contexts[{index}].id")
    if type(text) is not str:
        raise expected("a string", text, f"contexts[{index}].text")
    score = item.get("score")
    if score is not None and not (type(score) is float and math.isfinite(score)):
        score = _score(score, f"contexts[{index}].score")
    if len(item) == 2 + ("score" in item):
        return Context(context_id, text, score)
    metadata: dict[str, Any] = {}
    for key, value in item.items():
        if key not in _CONTEXT_KEYS:
            if not isinstance(key, str):
                raise expected("string keys", key, f"contexts[{index}]")
            metadata[key] = value
    return Context(context_id, text, score, MappingProxyType(metadata))


def _contexts(value: Any) -> tuple[Context, ...]:
    if value is None:
        return ()
    if type(value) is not list and not isinstance(value, list | tuple):
        raise expected("a list of strings or objects", value, "contexts")
    contexts: list[Context] = []
    positions: dict[str, int] = {}
    for index, item in enumerate(value):
        if type(item) is dict or (not isinstance(item, str) and isinstance(item, Mapping)):
            context = _context_object(item, index)
        elif isinstance(item, str):
            context = Context(str(index + 1), item)
        else:
            raise expected("a string or an object", item, f"contexts[{index}]")
        first = positions.setdefault(context.id, index)
        if first != index:
            raise FieldError(
                f"duplicate context id {context.id!r}: contexts[{first}] and contexts[{index}]",
                f"contexts[{index}].id" if isinstance(item, Mapping) else f"contexts[{index}]",
            )
        contexts.append(context)
    return tuple(contexts)


def _extra(item: Mapping[str, Any]) -> Mapping[str, Any]:
    if len(item) <= len(_RECORD_KEYS) and _RECORD_KEYS.issuperset(item):
        return _EMPTY
    check_reserved(item)
    extra: dict[str, Any] = {}
    for key, value in item.items():
        if key not in _RECORD_KEYS:
            if not isinstance(key, str):
                raise expected("string keys", key, None)
            extra[key] = value
    return MappingProxyType(extra)


def check_reserved(item: Mapping[str, Any]) -> None:
    """Refuse a record object that sets :data:`CONTEXTS_WITHOUT_TEXT` itself (only a reader of
    traces does, with a :class:`TraceNote`); raises :class:`FieldError`."""
    note = item.get(CONTEXTS_WITHOUT_TEXT)
    if note is not None and type(note) is not TraceNote:
        raise FieldError(f"the field {CONTEXTS_WITHOUT_TEXT!r} is reserved for records read from "
                         "traces (it leaves the metrics reading the contexts' text unscored): "
                         "rename the column", CONTEXTS_WITHOUT_TEXT)


def record_object(item: Any) -> Record:
    """Validate one decoded record object (not a conversation); raises :class:`FieldError`."""
    if type(item) is not dict and not isinstance(item, Mapping):
        raise expected("a record object", item, None)
    if "id" not in item:
        raise FieldError("missing required field 'id'", "id")
    return _valid_text(Record(
        id=identifier(item["id"], "id"),
        query=optional_str(item.get("query"), "query"),
        contexts=_contexts(item.get("contexts")),
        answer=optional_str(item.get("answer"), "answer"),
        references=_references(item.get("reference")),
        judgments=validate_judgments(item.get("judgments")),
        extra=_extra(item),
        tool_calls=validate_tool_calls(item.get("tool_calls"), "tool_calls"),
        reference_tool_calls=validate_tool_calls(item.get("reference_tool_calls"),
                                                 "reference_tool_calls"),
    ))


def checked_record(id: str, query: str | None,
                   contexts: Iterable[tuple[str, str, float | None]], answer: str | None,
                   references: tuple[str, ...], extra: Mapping[str, Any],
                   judgments: Mapping[str, int] | None = None) -> Record | None:
    """A record built from fields its reader made itself, of the types :func:`record_object`
    gives them: strings; ``contexts`` as ``(id, text, score)`` with non-empty ids, unique
    within the record, each score a finite float or None; ``extra`` without a record field's
    key; ``judgments`` as :func:`validate_judgments` returns them. The walk over a JSON object
    is skipped, not the checks of the values themselves: None when :func:`record_object` would
    refuse or repair one (an empty id, an id or a text with a lone surrogate), for the reader
    to hand over the record's JSON form instead, whose validation says what is wrong."""
    if not id or not _plain_id(id):
        return None
    contexts = tuple(contexts)
    for doc, text, _ in contexts:  # mostly ASCII: told at once
        if not doc.isascii() and not _plain_id(doc):
            return None
        if not text.isascii() and has_lone_surrogates(text):
            return None
    for text in (query, answer, *references):
        if text is not None and not text.isascii() and has_lone_surrogates(text):
            return None
    if not _RECORD_KEYS.isdisjoint(extra):
        raise UsageError(f"record extra must not use the reserved keys "
                         f"{sorted(_RECORD_KEYS.intersection(extra))}")
    built = []
    set_id, set_text, set_score, set_metadata = _SET_CONTEXT
    for doc, text, score in contexts:  # _made_context, written out: called 5 times a record
        context = object.__new__(Context)
        set_id(context, doc)
        set_text(context, text)
        set_score(context, score)
        set_metadata(context, _EMPTY)
        built.append(context)
    return _made_record(id, query, tuple(built), answer, references, _frozen_mapping(extra),
                        judgments)


def _plain_id(value: str) -> bool:
    """Whether ``value`` (a non-empty string) is an id as :func:`identifier` keeps it."""
    return value.isascii() or unicode_problem(value) is None


def plain_fields(id: Any, reference: Any, judgments: Any) -> bool:
    """Whether a record object's ``id``, ``reference`` and ``judgments`` are as
    :func:`record_object` keeps them, unchanged: a string id it takes as it is, a reference that
    is one string or None, without lone surrogates, and judgments that are None or a dict of
    non-empty string doc ids to integer grades within :data:`MAX_GRADE`. False for any other
    (or a value its validation would refuse or repair, which then says what is wrong)."""
    if type(id) is not str or not id or not _plain_id(id):
        return False
    if reference is not None and (type(reference) is not str or (
            not reference.isascii() and has_lone_surrogates(reference))):
        return False
    if judgments is None:
        return True
    if type(judgments) is not dict:
        return False
    for doc, grade in judgments.items():
        if type(doc) is not str or not doc or type(grade) is not int or not (
                -MAX_GRADE <= grade <= MAX_GRADE):
            return False
    return True


# A frozen dataclass's __init__ sets each field through object.__setattr__, then its
# __post_init__ puts the values in their final form; values already in it are set through
# the slots themselves, at a third of the cost, for the records a reader makes by the
# hundred thousand.
_SET_CONTEXT = tuple(Context.__dict__[name].__set__ for name in ("id", "text", "score",
                                                                  "metadata"))
_SET_RECORD = tuple(Record.__dict__[field.name].__set__ for field in dataclasses.fields(Record))


def _made_record(id: str, query: str | None, contexts: tuple[Context, ...],
                 answer: str | None, references: tuple[str, ...], extra: Mapping[str, Any],
                 judgments: Mapping[str, int] | None = None,
                 tool_calls: tuple[ToolCall, ...] | None = None,
                 reference_tool_calls: tuple[ToolCall, ...] | None = None,
                 conversation: Conversation | None = None, turn: int = 0) -> Record:
    """``Record(...)``, the fields given in their final form (tuples, read-only mappings)."""
    record = object.__new__(Record)
    (set_id, set_query, set_contexts, set_answer, set_references, set_judgments, set_extra,
     set_tool_calls, set_reference_tool_calls, set_conversation, set_turn) = _SET_RECORD
    set_id(record, id)
    set_query(record, query)
    set_contexts(record, contexts)
    set_answer(record, answer)
    set_references(record, references)
    set_judgments(record, judgments)
    set_extra(record, extra)
    set_tool_calls(record, tool_calls)
    set_reference_tool_calls(record, reference_tool_calls)
    set_conversation(record, conversation)
    set_turn(record, turn)
    return record


def with_judgments(record: Record, judgments: Mapping[str, int]) -> Record:
    """``dataclasses.replace(record, judgments=judgments)`` (checked grades, read-only),
    every other field kept as it is."""
    if type(judgments) is not MappingProxyType:
        judgments = MappingProxyType(dict(judgments))
    return _made_record(record.id, record.query, record.contexts, record.answer,
                        record.references, record.extra, judgments, record.tool_calls,
                        record.reference_tool_calls, record.conversation, record.turn)


def _valid_text(record: Record) -> Record:
    """The record, or a copy with each lone surrogate of its texts replaced with U+FFFD and
    the fields repaired listed in its extra (:data:`LONE_SURROGATES`), which its details in
    ``records.jsonl`` repeat."""
    texts = [record.query, record.answer, *record.references,
             *(context.text for context in record.contexts)]
    if not any(text is not None and has_lone_surrogates(text) for text in texts):
        return record
    changed: list[str] = []
    query, answer = (repaired(record.query, "query", changed),
                     repaired(record.answer, "answer", changed))
    contexts = tuple(dataclasses.replace(c, text=repaired(c.text, f"contexts[{i}].text", changed))
                     for i, c in enumerate(record.contexts))
    references = tuple(repaired(text, "reference" if len(record.references) == 1
                                else f"reference[{i}]", changed)
                       for i, text in enumerate(record.references))
    return dataclasses.replace(record, query=query, answer=answer, contexts=contexts,
                               references=references,
                               extra={**record.extra, LONE_SURROGATES: tuple(changed)})
