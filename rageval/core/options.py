"""An option of a run, declared once: :class:`Option` names it, its type, default, help text,
check, command-line flags and evaluation-file key, and whether it enters the signature.

The argparse flags (:func:`add_options`), the defaults (:func:`defaults`) and the fields of an
evaluation file are built from the declarations. A configuration dataclass carries its options
on its fields (``field(metadata=declare(...))``, read back by :func:`options_of`), so that a
new option is one field plus the code that acts on it.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FileKey", "Option", "Signed", "add_options", "declare", "defaults", "options_of"]

_KEY = "rageval.option"  # where a dataclass field's metadata keeps its Option


@dataclass(frozen=True)
class FileKey:
    """Where an option sits in an evaluation file, and how its TOML value is read
    (the kinds are those of :mod:`rageval.config.schema`)."""

    table: str  # "" at the top of the file
    key: str
    kind: str
    doc: str = ""


def _given(value: Any) -> bool:
    return value is not None


@dataclass(frozen=True)
class Signed:
    """How an option's value is written in a metric's signature: the field's ``key`` and
    ``short`` name (``temperature``/``t``), the value as ``text``, and ``when`` the field is
    written (default: when the value is set)."""

    key: str
    short: str
    text: Callable[[Any], str] = str
    when: Callable[[Any], bool] = _given

    def always(self) -> Signed:
        return dataclasses.replace(self, when=lambda value: True)


@dataclass(frozen=True)
class Option:
    """One option of a run.

    ``dest``: its argparse destination (the name the command line and the evaluation file
    set); ``name``: the field it fills where it is used (a :class:`JudgeConfig` field; the
    destination when left out). ``type`` converts a flag's text (``int``, ``float``);
    ``switch``: a ``--x/--no-x`` pair; ``append``: repeatable, its values in a list.
    ``check`` raises a usage error for a bad value (``None`` is never checked); ``parse``
    turns what the command line or the file gives (``KEY=VALUE`` items) into the field's value;
    ``signed``: how the value enters a metric's signature (:class:`Signed`; None: it does not).
    """

    dest: str
    flags: tuple[str, ...] = ()
    help: str | None = None
    type: Callable[[str], Any] | None = None
    default: Any = None
    switch: bool = False
    append: bool = False
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    file: FileKey | None = None
    check: Callable[[Any], None] | None = None
    parse: Callable[[Any], Any] | None = None
    signed: Signed | None = None
    name: str = ""

    @property
    def field(self) -> str:
        return self.name or self.dest

    def argparse_kwargs(self) -> dict[str, Any]:
        """What ``add_argument`` takes for this option (its default left out: see
        :func:`defaults`)."""
        kwargs: dict[str, Any] = {"dest": self.dest, "help": self.help}
        if self.switch:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif self.append:
            kwargs["action"] = "append"
        if self.type is not None:
            kwargs["type"] = self.type
        if self.choices:
            kwargs["choices"] = self.choices
        if self.metavar is not None:
            kwargs["metavar"] = self.metavar
        return kwargs


def declare(*, kind: str | None = None, doc: str = "", **kwargs: Any) -> Mapping[str, Any]:
    """A dataclass field's metadata declaring its option (the keywords of :class:`Option`;
    ``dest`` defaults to the field's name). ``kind``: how an evaluation file gives it, under
    the field's name in the table :func:`options_of` is given (``doc`` says what it is there);
    none: the file does not."""
    return {_KEY: (kwargs, kind, doc)}


def options_of(cls: type, table: str = "") -> tuple[Option, ...]:
    """The options a configuration dataclass declares on its fields, in their order, each
    with the field's name and default, and its evaluation-file key in ``table``."""
    out = []
    for f in dataclasses.fields(cls):
        if _KEY not in f.metadata:
            continue
        declared, kind, doc = f.metadata[_KEY]
        # A collection's default (an empty tuple) is argparse's None: nothing given.
        default = f.default if isinstance(f.default, str | int | float | bool) else None
        file = FileKey(table, f.name, kind, doc) if kind is not None else None
        out.append(Option(**{"dest": f.name, "default": default, "file": file, **declared},
                          name=f.name))
    return tuple(out)


def add_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                options: Iterable[Option]) -> None:
    """Add the flags of ``options`` (those that have any) to ``parser``."""
    for option in options:
        if option.flags:
            parser.add_argument(*option.flags, **option.argparse_kwargs())


def defaults(options: Iterable[Option]) -> dict[str, Any]:
    """Every default that is not argparse's own (``None``): kept apart from ``add_argument``,
    so that ``rageval run`` can tell a flag given from a default."""
    return {option.dest: option.default for option in options if option.default is not None}
