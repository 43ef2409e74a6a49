"""Judge rubrics: loading, validation and hashing, and where the built-in prompts live.

A rubric is a TOML file, one per criterion (``faithfulness``, ``correctness``, ...)::

    id = "faithfulness"
    version = "1"
    description = "Every claim the answer makes is supported by the retrieved contexts."
    inputs = ["contexts", "answer"]
    template = \"\"\"
    Grade the FAITHFULNESS of ...
    {contexts}
    {answer}
    \"\"\"

    [scale]
    min = 1
    max = 5

    [anchors]
    1 = "Mostly unfaithful: ..."
    ...
    5 = "Fully faithful: ..."

``inputs`` names the record fields the judge sees, among :data:`INPUTS`; the ``template``
places each of them exactly once with a ``{name}`` placeholder. ``level`` (optional, one of
:data:`LEVELS`) is ``turn`` by default; a ``conversation`` rubric grades each conversation as a
whole, from its ``conversation`` input. A turn-level rubric that places ``{conversation}``
shows the turns before the one judged there (nothing for a record on its own); one that does
not gets them above its template. ``anchors`` describes every
integer score of the scale. The built-in rubrics live in the repository's top-level
``prompts/`` and ship inside the wheel (located by :func:`builtin_prompts`); user rubrics are
loaded by path or by name from a directory.

The file's SHA-256 (:attr:`Rubric.hash`) is part of every score's signature and of the judge
cache key, next to :data:`~rageval.judge.rubric.render.RENDER_VERSION` (the fixed wording
:func:`~rageval.judge.rubric.render.render` wraps around a rubric).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rageval.core.errors import InputError, UsageError, did_you_mean
from rageval.judge.prompting.prompt_files import (
    NOT_RUBRICS,
    SHORT_HASH,
    builtin_prompts,
    file_hash,
)
from rageval.judge.prompting.slots import PLACEHOLDER

__all__ = ["INPUTS", "LEVELS", "Rubric", "list_rubrics", "load_rubric"]

#: The inputs a rubric may ask for: the record's query, all its contexts, the one context
#: being graded (``context_index``), its answer, its reference answer(s), and the
#: conversation it belongs to (:mod:`rageval.judge.prompting.history`).
INPUTS: tuple[str, ...] = ("query", "contexts", "context", "answer", "reference", "conversation")
#: What a rubric grades: each turn (or record on its own), or each whole conversation.
LEVELS: tuple[str, ...] = ("turn", "conversation")

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
_KEYS = ("id", "version", "description", "level", "inputs", "template", "scale", "anchors")
_MAX_SCALE_POINTS = 11  # e.g. 0-10


@dataclass(frozen=True, slots=True)
class Rubric:
    """One judge criterion, validated. Build it with :func:`load_rubric`.

    ``anchors`` holds ``(score, description)`` for every integer score from ``scale_min`` to
    ``scale_max``, in order. ``source`` is the file the rubric was read from; ``hash`` is the
    SHA-256 (hex) of its bytes, with CRLF line endings read as LF so that a checkout with
    Windows line endings hashes the same.
    """

    id: str
    version: str
    description: str
    inputs: tuple[str, ...]
    scale_min: int
    scale_max: int
    anchors: tuple[tuple[int, str], ...]
    template: str
    source: str
    hash: str
    builtin: bool = False
    level: str = "turn"

    @property
    def short_hash(self) -> str:
        """The first 12 hex digits of :attr:`hash`, for signatures."""
        return self.hash[:SHORT_HASH]

    @property
    def scores(self) -> range:
        """Every valid score, from ``scale_min`` to ``scale_max`` inclusive."""
        return range(self.scale_min, self.scale_max + 1)

    @property
    def needs(self) -> frozenset[str]:
        """The :class:`~rageval.core.records.Record` fields a record must have to be rendered
        (a turn's conversation is shown when there is one, never needed)."""
        fields = {"context": "contexts", "reference": "references"}
        optional = {"conversation"} if self.level == "turn" else set()
        return frozenset(fields.get(name, name) for name in self.inputs if name not in optional)


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------


def _builtin_names() -> list[str]:
    directory = builtin_prompts()
    if not directory.is_dir():
        return []
    return sorted(
        entry.name[: -len(".toml")]
        for entry in directory.iterdir()
        if entry.name.endswith(".toml") and entry.is_file()
    )


def list_rubrics(prompts_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Names of the rubrics loadable by name: the built-ins plus those in ``prompts_dir``."""
    names = set(_builtin_names())
    if prompts_dir is not None:
        directory = Path(prompts_dir)
        if directory.is_dir():
            names.update(p.stem for p in directory.glob("*.toml") if _NAME.fullmatch(p.stem))
    return sorted(names - (NOT_RUBRICS - {"pairwise"}))


def _looks_like_path(value: str | os.PathLike[str]) -> bool:
    if isinstance(value, os.PathLike):
        return True
    return value.endswith(".toml") or "/" in value or os.sep in value


def load_rubric(
    name_or_path: str | os.PathLike[str],
    prompts_dir: str | os.PathLike[str] | None = None,
) -> Rubric:
    """Load and validate a rubric.

    ``name_or_path`` is a path (a :class:`os.PathLike`, or a string ending in ``.toml`` or
    holding a path separator) or a rubric name. A name is looked up first as
    ``prompts_dir/<name>.toml`` when ``prompts_dir`` is given, then among the built-in
    rubrics; a rubric loaded by name must have that name as its ``id``.

    Raises :class:`~rageval.core.errors.InputError` (naming the file and the field) for a missing
    or invalid file, and :class:`~rageval.core.errors.UsageError` for an unknown name.
    """
    if _looks_like_path(name_or_path):
        path = os.fspath(name_or_path)
        return _parse(_read(Path(path), path), path, expected_id=None, builtin=False)
    name = str(name_or_path)
    if not _NAME.fullmatch(name):
        raise UsageError(
            f"invalid rubric name {name!r}: use lowercase letters, digits, '_' and '-', "
            "or give a path to a .toml file"
        )
    if name in NOT_RUBRICS - {"pairwise"}:
        raise UsageError(f"{name!r} is a step of the claim-level metrics (claims:, nuggets:, "
                         "citations:), not a rubric")
    if prompts_dir is not None:
        candidate = Path(prompts_dir) / f"{name}.toml"
        if candidate.is_file():
            source = os.fspath(candidate)
            return _parse(_read(candidate, source), source, expected_id=name, builtin=False)
    entry = builtin_prompts().joinpath(f"{name}.toml")
    if entry.is_file():
        source = str(entry)
        return _parse(entry.read_bytes(), source, expected_id=name, builtin=True)
    known = list_rubrics(prompts_dir)
    hint = did_you_mean(name, known)
    hint = f"; {hint}" if hint else ""
    where = f" (looked in {os.fspath(prompts_dir)} and the built-ins)" if prompts_dir else ""
    raise UsageError(
        f"unknown rubric {name!r}{where}{hint}; known rubrics: {', '.join(known) or 'none'}"
    )


def _read(path: Path, source: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", path=source) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a rubric .toml file", path=source) from None
    except OSError as error:
        raise InputError(f"cannot read file: {error.strerror or error}", path=source) from None


def _parse(data: bytes, source: str, *, expected_id: str | None, builtin: bool) -> Rubric:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"not valid UTF-8 ({error.reason})", path=source) from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"malformed TOML: {error}", path=source) from None
    return _validate(table, source, file_hash(data), expected_id, builtin)


def _fail(source: str, field: str, message: str) -> InputError:
    return InputError(message, path=source, field=field)


def _string(table: dict[str, Any], key: str, source: str) -> str:
    value = table.get(key)
    if value is None:
        raise _fail(source, key, "missing (a non-empty string)")
    if not isinstance(value, str):
        raise _fail(source, key, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise _fail(source, key, "must not be empty")
    return value


def _integer(table: dict[str, Any], key: str, field: str, source: str) -> int:
    value = table.get(key)
    if value is None:
        raise _fail(source, field, "missing (an integer)")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(source, field, f"must be an integer, got {value!r}")
    return value


def _validate(
    table: dict[str, Any], source: str, digest: str, expected_id: str | None, builtin: bool
) -> Rubric:
    """The rubric a parsed TOML table describes, its fields checked in the file's order (the
    first fault found is the one reported)."""
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise _fail(source, unknown[0], f"unknown key; expected keys: {', '.join(_KEYS)}")
    rubric_id = _checked_id(table, source, expected_id)
    version = _string(table, "version", source)
    description = " ".join(_string(table, "description", source).split())
    inputs = _checked_inputs(table, source)
    level = _checked_level(table, inputs, source)
    template = _checked_template(table, inputs, source)
    low, high = _checked_scale(table, source)
    described = _checked_anchors(table, low, high, source)
    return Rubric(
        id=rubric_id,
        version=version,
        description=description,
        inputs=tuple(inputs),
        scale_min=low,
        scale_max=high,
        anchors=tuple(described),
        template=template,
        source=source,
        hash=digest,
        builtin=builtin,
        level=level,
    )


def _checked_id(table: dict[str, Any], source: str, expected_id: str | None) -> str:
    """The rubric's name: a valid name, and the file's own when it is read by name."""
    rubric_id = _string(table, "id", source)
    if not _NAME.fullmatch(rubric_id):
        raise _fail(
            source, "id", f"{rubric_id!r} is not a valid name (lowercase letters, digits, _ -)"
        )
    if expected_id is not None and rubric_id != expected_id:
        raise _fail(source, "id", f"is {rubric_id!r} but the file is named {expected_id!r}")
    return rubric_id


def _checked_inputs(table: dict[str, Any], source: str) -> list[str]:
    """The record fields the rubric grades: known inputs, each listed once."""
    inputs = table.get("inputs")
    if inputs is None:
        raise _fail(source, "inputs", f"missing (a list of inputs among {', '.join(INPUTS)})")
    if not isinstance(inputs, list) or not inputs:
        raise _fail(source, "inputs", "must be a non-empty list of strings")
    for index, name in enumerate(inputs):
        if name not in INPUTS:
            raise _fail(
                source, f"inputs[{index}]", f"unknown input {name!r}; known: {', '.join(INPUTS)}"
            )
    if len(set(inputs)) != len(inputs):
        raise _fail(source, "inputs", "lists an input more than once")
    return inputs


def _checked_level(table: dict[str, Any], inputs: list[str], source: str) -> str:
    """What the rubric grades (a turn or a whole conversation), agreeing with its inputs."""
    level = table.get("level", "turn")
    if level not in LEVELS:
        raise _fail(source, "level", f"must be one of {', '.join(LEVELS)}, got {level!r}")
    if level == "conversation" and "conversation" not in inputs:
        raise _fail(source, "inputs", "a conversation-level rubric grades the conversation: "
                    "list 'conversation' among its inputs")
    if level == "conversation" and {"context", "contexts"} & set(inputs):
        raise _fail(source, "inputs", "a conversation-level rubric sees the conversation's "
                    "messages; its turns' contexts are graded turn by turn")
    return level


def _checked_template(table: dict[str, Any], inputs: list[str], source: str) -> str:
    """The prompt template: each input's placeholder exactly once, and no other."""
    template = _string(table, "template", source).strip("\n")
    seen = [match.group(1) for match in PLACEHOLDER.finditer(template)]
    for name in seen:
        if name not in inputs:
            raise _fail(
                source,
                "template",
                f"placeholder {{{name}}} is not among the inputs ({', '.join(inputs)})",
            )
    for name in inputs:
        count = seen.count(name)
        if count != 1:
            raise _fail(
                source, "template", f"must hold the placeholder {{{name}}} once, found {count}"
            )
    return template


def _checked_scale(table: dict[str, Any], source: str) -> tuple[int, int]:
    """The scale's lowest and highest scores: integers, increasing, at most 11 points."""
    scale = table.get("scale")
    if not isinstance(scale, dict):
        raise _fail(source, "scale", "missing (a table with integer 'min' and 'max')")
    extra = sorted(set(scale) - {"min", "max"})
    if extra:
        raise _fail(source, f"scale.{extra[0]}", "unknown key; expected 'min' and 'max'")
    low = _integer(scale, "min", "scale.min", source)
    high = _integer(scale, "max", "scale.max", source)
    if high <= low:
        raise _fail(source, "scale.max", f"must be greater than scale.min ({low}), got {high}")
    if high - low + 1 > _MAX_SCALE_POINTS:
        raise _fail(source, "scale", f"{low}-{high} has more than {_MAX_SCALE_POINTS} points")
    return low, high


def _checked_anchors(
    table: dict[str, Any], low: int, high: int, source: str
) -> list[tuple[int, str]]:
    """Each score of the scale and its description (whitespace folded), no other key."""
    anchors = table.get("anchors")
    if not isinstance(anchors, dict):
        raise _fail(source, "anchors", f"missing (a table describing each score {low}-{high})")
    expected = [str(score) for score in range(low, high + 1)]
    for key in anchors:
        if key not in expected:
            raise _fail(source, f"anchors.{key}", f"is not a score of the scale {low}-{high}")
    described: list[tuple[int, str]] = []
    for key in expected:
        if key not in anchors:
            raise _fail(source, f"anchors.{key}", "missing: every score needs a description")
        value = anchors[key]
        if not isinstance(value, str) or not value.strip():
            raise _fail(source, f"anchors.{key}", "must be a non-empty string")
        described.append((int(key), " ".join(value.split())))
    return described
