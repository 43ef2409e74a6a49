"""A judge request and what came back for it: :class:`Unit` (one request, its cache keys under
each wire format the run may ask in and its request id), :class:`Reply` (a reply text or why
there is none), and :func:`reply_meta`, what is stored beside a new reply in the cache. Shared
by the ways a reply is fetched: one chat completion each (:mod:`~rageval.judge.llm.replies`)
or the provider's batch API (:mod:`rageval.judge.llm.batch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rageval.judge.llm.cache.entries import keys_and_request_id_of
from rageval.judge.llm.transport.formats import ReplySchema

if TYPE_CHECKING:
    from rageval.core.records import Record
    from rageval.judge.llm.options import JudgeOptions

__all__ = ["Reply", "Unit", "make_unit", "new_unit", "reply_meta"]


@dataclass(frozen=True)
class Unit:
    """One judge request: a record (and one of its contexts, for per-context rubrics), a
    sample index, and for pairwise judging the order of the two answers.

    ``keys`` maps each wire format of the run's ladder, in order, to the request's cache key
    in that format; :attr:`key`, the first, names the request within a run. ``request_id``:
    the request's id in the cache (None: looked up by its keys alone).
    """

    record: int
    context: int | None
    sample: int
    messages: list[dict[str, str]]
    keys: dict[str, str]
    order: int = 0
    # The reply schema of this request when it differs from the one ``gather`` is given (the
    # claim checks: their schema names each claim of the request).
    schema: ReplySchema | None = None
    request_id: str | None = None
    # The first of ``keys``, kept (it names the request wherever the run reads its reply).
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", next(iter(self.keys.values())))

    def at(self, record: int) -> Unit:
        """This request as record ``record`` of another list of records (a batch of the
        scope it was made for); faster than :func:`dataclasses.replace`."""
        if record == self.record:
            return self
        return new_unit(record, self.context, self.sample, self.messages, self.keys,
                        self.order, self.schema, self.request_id)

    def lookup(self) -> tuple[str | None, tuple[str, ...]]:
        """The request as the cache looks it up (its id, its keys in the ladder's order)."""
        return self.request_id, tuple(self.keys.values())


def new_unit(record: int, context: int | None, sample: int, messages: list[dict[str, str]],
             keys: dict[str, str], order: int = 0, schema: ReplySchema | None = None,
             request_id: str | None = None) -> Unit:
    """``Unit(record, context, ...)``, its fields set at once: a frozen dataclass's
    ``__init__`` sets each through ``object.__setattr__``, most of the cost of a unit, and a
    replay makes one or two per request."""
    unit = object.__new__(Unit)
    unit.__dict__.update(record=record, context=context, sample=sample, messages=messages,
                         keys=keys, order=order, schema=schema, request_id=request_id,
                         key=next(iter(keys.values())))
    return unit


def make_unit(judge: JudgeOptions, schema: ReplySchema, record: int, context: int | None,
              sample: int, messages: list[dict[str, str]], order: int = 0,
              own_schema: bool = False) -> Unit:
    """A unit and its cache keys; ``own_schema`` keeps ``schema`` on the unit (sent with it
    whatever schema ``gather`` is given)."""
    parts = schema.key_parts(judge.model or "", judge.ladder, judge.params(sample), sample)
    keys, request_id = keys_and_request_id_of(messages, parts)
    return new_unit(record, context, sample, messages, keys, order,
                    schema if own_schema else None, request_id)


@dataclass
class Reply:
    """What came back for one unit: a reply text (and log-probabilities), or an error; the
    wire format and endpoint that produced the reply."""

    text: str | None = None
    logprobs: list[list[Any]] | None = None
    cached: bool = False
    error: str | None = None
    format: str | None = None
    endpoint: str | None = None
    finish_reason: str | None = None
    served_model: str | None = None  # the model the endpoint said answered
    # Parameters the endpoint refused, left at the model's default (its ``sent`` meta).
    defaults: tuple[str, ...] = ()

    def unusable(self, why: str) -> str:
        """The reason a reply without a usable verdict leaves its item unscored."""
        cut = " (the reply was cut at the token limit)" if self.finish_reason == "length" else ""
        return f"judge reply not usable: {why}{cut}"


def reply_meta(unit: Unit, records: list[Record], meta: Mapping[str, Any], *, fmt: str,
               finish_reason: str | None, served_model: str | None,
               logprobs: list[list[Any]] | None, sent: Mapping[str, Any] | None
               ) -> dict[str, Any]:
    """What is stored beside a new reply to ``unit``: the caller's ``meta`` (its rubric or
    claim step), the record's id (and the graded context's), the wire format, why the reply
    finished, the model the endpoint said answered, log-probabilities when asked for, and what
    was sent other than configured (:mod:`~rageval.judge.llm.transport.params`)."""
    record = records[unit.record]
    extra = {**meta, "record": record.id, "format": fmt, "finish_reason": finish_reason,
             "served_model": served_model}
    if unit.context is not None:
        extra["context"] = record.contexts[unit.context].id
    if logprobs is not None:
        extra["logprobs"] = logprobs
    if sent:
        extra["sent"] = dict(sent)
    return extra
