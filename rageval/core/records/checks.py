"""The small checks every part of a record's validation shares: :class:`FieldError` and the
readers of ids, optional strings and found values in error messages.

A check raises :class:`FieldError` naming the field (a dotted path such as ``contexts[2].id``);
the reader of the file adds the file and the line.
"""

from __future__ import annotations

import numbers
from typing import Any

from rageval.core.outputs.surrogates import unicode_problem

__all__ = ["MAX_NESTING", "FieldError", "check_nesting", "describe", "expected", "identifier",
           "is_integer", "optional_str"]

#: The deepest a free-form JSON value of a record (a tool call's arguments or result) may
#: nest lists and objects: deeper values are refused when read, before a comparison, a hash or
#: an encoder walks them recursively (Python stops near 1,000 levels with a RecursionError).
MAX_NESTING = 100

_REPR_LIMIT = 40

_TYPE_NAMES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
    type(None): "null",
}


class FieldError(Exception):
    """A validation failure inside one record; the caller adds the file and the line."""

    def __init__(self, message: str, field: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def within(self, prefix: str, message: str = "") -> FieldError:
        """The same failure, one level down: its field under ``prefix`` (``turns[2]``) and
        ``message`` (what the prefix is, for the reader) before its own."""
        if not prefix or self.field is None:
            field = prefix if prefix else self.field
        else:
            field = f"{prefix}.{self.field}"
        return FieldError(f"{message}: {self.message}" if message else self.message, field)


def describe(value: Any) -> str:
    """Type name and short repr of a found value, for error messages."""
    if value is None:
        return "null"
    name = _TYPE_NAMES.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return f"{name} {text}"


def expected(what: str, value: Any, field: str | None) -> FieldError:
    return FieldError(f"expected {what}, found {describe(value)}", field)


def is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def identifier(value: Any, field: str) -> str:
    """A record or context id: a non-empty string of valid Unicode (no lone surrogate), or an
    integer converted with ``str()``."""
    if type(value) is str or isinstance(value, str):
        problem = unicode_problem(value)
        if problem is not None:  # an id is matched and written as it is: never repaired
            raise FieldError(f"the id is {problem}", field)
        if value:
            return value
    elif is_integer(value):
        return str(int(value))
    raise expected("a non-empty string or an integer", value, field)


def check_nesting(value: Any, field: str, limit: int = MAX_NESTING) -> None:
    """Raise :class:`FieldError` when ``value`` nests lists and objects more than ``limit``
    levels deep (walked without recursion, so any depth is measured)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            raise FieldError(f"JSON nested more than {limit} levels deep (lists and objects "
                             "within each other); flatten it", field)
        stack.extend((child, depth + 1) for child in children)


def optional_str(value: Any, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise expected("a string", value, field)
