"""A metric's declared parameters (:class:`Param`): name, type, default, allowed values and
meaning, which drive validation, the canonical name, the signature and ``rageval metrics``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rageval.core.errors import UsageError

__all__ = ["Param", "render_value"]


@dataclass(frozen=True, slots=True)
class Param:
    """One declared parameter: its name, type, default, allowed values and meaning."""

    name: str
    type: type
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None

    def convert(self, raw: Any, metric: str) -> Any:
        if raw is None and self.default is None:  # "not set", as a copy of a metric passes it
            return None
        value = self._coerce(raw, metric)
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            raise UsageError(f"{metric}: {self.name}={raw} is not one of: {allowed}")
        if self.minimum is not None and value < self.minimum:
            raise UsageError(f"{metric}: {self.name}={raw} must be at least {self.minimum:g}")
        return value

    def _coerce(self, raw: Any, metric: str) -> Any:
        if isinstance(raw, self.type) and not (self.type is int and isinstance(raw, bool)):
            return raw
        if not isinstance(raw, str):
            raise UsageError(f"{metric}: {self.name} must be {self.type.__name__}, got {raw!r}")
        try:
            if self.type is bool:
                return _parse_bool(raw)
            return self.type(raw)
        except ValueError:
            raise UsageError(
                f"{metric}: {self.name}={raw} is not a valid {self.type.__name__}"
            ) from None


def _parse_bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError(raw)


def render_value(value: Any) -> str:
    """A parameter value as metric names write it (``true``, ``17``, ``roberta-large``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
