"""Tool calls: what an agent called between retrieval and its answer, and what it should have.

A record (or a turn of a conversation) may carry ``tool_calls``, the calls the system made in
order, and ``reference_tool_calls``, the calls expected of it. Each is a list of objects::

    {"name": "search", "arguments": {"query": "GDP of France", "year": 2023},
     "result": "2.78 trillion USD"}

``name`` is required (a non-empty string); ``arguments`` is a JSON object, or a string holding
one (as the OpenAI API sends them), and absent means no arguments; ``result`` is any JSON
value the tool returned (absent: not recorded); ``id`` (the call's id) is accepted and not
kept. The OpenAI form ``{"id": ..., "type": "function", "function": {"name": ...,
"arguments": "..."}}`` reads the same. An absent list means "not recorded" (a tool metric
leaves the record unscored); an empty list means "no calls".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rageval.core.records.checks import FieldError, check_nesting, expected, identifier

__all__ = ["ToolCall", "validate_tool_calls"]

_CALL_KEYS = frozenset({"name", "arguments", "result", "id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})
_HINTS = {"args": "arguments", "tool": "name", "tool_name": "name", "output": "result"}


class _NoResult:
    """What a call's ``result`` is when none was recorded (``null`` is a result)."""

    def __repr__(self) -> str:
        return "<not recorded>"


_NO_RESULT: Any = _NoResult()


@dataclasses.dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call: the tool's name, its arguments (a read-only JSON object) and, when
    recorded, what it returned."""

    name: str
    arguments: Mapping[str, Any] = dataclasses.field(
        default_factory=lambda: MappingProxyType({}))
    result: Any = _NO_RESULT

    def __post_init__(self) -> None:
        if type(self.arguments) is not MappingProxyType:
            object.__setattr__(self, "arguments", MappingProxyType(dict(self.arguments)))

    @property
    def has_result(self) -> bool:
        return self.result is not _NO_RESULT

    def text(self) -> str:
        """The call as prompts and reports show it: ``name({"arg": value})``, arguments as
        JSON with sorted keys."""
        arguments = json.dumps(dict(self.arguments), ensure_ascii=False, sort_keys=True)
        return f"{self.name}({arguments})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "arguments": dict(self.arguments)}
        if self.has_result:
            out["result"] = self.result
        return out


def validate_tool_calls(value: Any, field: str) -> tuple[ToolCall, ...] | None:
    """The tool calls found at ``field`` (``None`` when absent); raises :class:`FieldError`."""
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise expected("a list of tool call objects", value, field)
    return tuple(_tool_call(item, f"{field}[{index}]") for index, item in enumerate(value))


def _tool_call(item: Any, field: str) -> ToolCall:
    if not isinstance(item, Mapping):
        raise expected("a tool call object", item, field)
    _check_keys(item, _CALL_KEYS, field)
    if "id" in item and item["id"] is not None:
        identifier(item["id"], f"{field}.id")
    function = item.get("function")
    if function is not None:  # the OpenAI form
        if not isinstance(function, Mapping):
            raise expected("an object with 'name' and 'arguments'", function, f"{field}.function")
        _check_keys(function, _FUNCTION_KEYS, f"{field}.function")
        clash = sorted(_FUNCTION_KEYS.intersection(item))
        if clash:
            raise FieldError(f"'{clash[0]}' is given both here and in 'function'",
                             f"{field}.{clash[0]}")
        source, where = function, f"{field}.function"
    else:
        source, where = item, field
    if "name" not in source:
        raise FieldError("missing required field 'name'", f"{where}.name")
    name = source["name"]
    if not isinstance(name, str) or not name:
        raise expected("a non-empty string", name, f"{where}.name")
    arguments = _arguments(source.get("arguments"), f"{where}.arguments")
    result = item.get("result", _NO_RESULT)
    check_nesting(result, f"{field}.result")
    return ToolCall(name, arguments, result)


def _check_keys(item: Mapping[str, Any], known: frozenset[str], field: str) -> None:
    for key in item:
        if key not in known:
            hint = _HINTS.get(key) if isinstance(key, str) else None
            also = f" (did you mean '{hint}'?)" if hint in known else ""
            raise FieldError(f"unknown key {key!r} in a tool call{also}; known: "
                             f"{', '.join(sorted(known))}", f"{field}.{key}")


def _arguments(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if isinstance(value, str):  # the OpenAI API sends the arguments as JSON text
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as error:
            raise FieldError(f"the arguments are not valid JSON ({error})", field) from None
        except RecursionError:
            raise FieldError("the arguments are JSON nested too deeply to read (lists and "
                             "objects within each other)", field) from None
    if not isinstance(value, Mapping):
        raise expected("a JSON object of arguments", value, field)
    check_nesting(value, field)
    for key in value:
        if not isinstance(key, str):
            raise expected("string argument names", key, field)
    return MappingProxyType(dict(value))
