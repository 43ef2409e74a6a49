"""Signatures: the configuration that changes a number, rendered next to it.

Modelled on sacrebleu's ``BLEU|nrefs:1|case:mixed|tok:13a|...``: an ordered list of
``key:value`` fields joined by ``|``, metric first and library versions last. The long form
spells keys out (``metric:ndcg|cutoff:10|gain:linear|judgments:inline|...|rageval:0.1.0``); the
short form abbreviates the keys that declare a short name (``m:ndcg|k:10|gain:linear|j:inline|...
|v:0.1.0``) for tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Field:
    key: str
    value: str
    short: str | None = None  # abbreviated key for the short form; the key itself when None
    version: bool = False  # library versions are always rendered last


@dataclass(frozen=True, slots=True)
class Signature:
    """An immutable, ordered set of fields. Equal signatures mean comparable numbers."""

    fields: tuple[Field, ...]

    @classmethod
    def of(cls, fields: Iterable[Field]) -> Signature:
        items = list(fields)
        keys = [f.key for f in items]
        if len(set(keys)) != len(keys):
            raise ValueError(f"duplicate signature keys in {keys}")
        # Stable partition: configuration first, versions last, each keeping its given order.
        ordered = [f for f in items if not f.version] + [f for f in items if f.version]
        return cls(tuple(ordered))

    def extend(self, fields: Iterable[Field]) -> Signature:
        return Signature.of([*self.fields, *fields])

    def get(self, key: str) -> str | None:
        return next((f.value for f in self.fields if f.key == key), None)

    def format(self, *, short: bool = False) -> str:
        return "|".join(f"{(f.short or f.key) if short else f.key}:{f.value}" for f in self.fields)

    def __str__(self) -> str:
        return self.format()

    def as_dict(self) -> dict[str, str]:
        return {f.key: f.value for f in self.fields}

    def differences(self, other: Signature) -> list[str]:
        """Keys whose values differ (or exist on one side only): why two numbers don't compare."""
        mine, theirs = self.as_dict(), other.as_dict()
        return [k for k in dict.fromkeys([*mine, *theirs]) if mine.get(k) != theirs.get(k)]
