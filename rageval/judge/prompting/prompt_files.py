"""What the judge's prompt files share: where the built-in ones are, a TOML table of string
fields and a template that places each of its inputs exactly once (the pairwise prompt, the
claim-level steps), the file's hash, and what the manifest records of it."""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from rageval.core.errors import InputError, UsageError
from rageval.judge.prompting.slots import PLACEHOLDER

__all__ = ["NOT_RUBRICS", "SHORT_HASH", "HashedPrompt", "PromptFile", "builtin_prompts",
           "file_hash", "prompt_info", "read_table", "template_of"]

#: Hex digits of a prompt file's SHA-256 shown in signatures.
SHORT_HASH = 12

#: Prompt files that are not rubrics, in the built-in folder or in --prompts-dir: the pairwise
#: prompt and the claim-level steps (rageval.judge.claims.steps.STEPS).
NOT_RUBRICS = frozenset({"pairwise", "extract_claims", "check_claims", "nuggets_create",
                         "nuggets_importance", "nuggets_assign"})


@dataclass(frozen=True, slots=True)
class PromptFile:
    """A prompt file, validated: what signatures and the manifest name of it (``id``,
    ``version``, ``hash``, ``short_hash``, ``source``) and what rendering uses."""

    id: str
    version: str
    description: str
    template: str
    source: str
    hash: str
    builtin: bool = False

    @property
    def short_hash(self) -> str:
        """The first digits of :attr:`hash`, for signatures (as a rubric's)."""
        return self.hash[:SHORT_HASH]


def read_table(data: bytes, source: str, keys: Sequence[str]) -> dict[str, Any]:
    """The file's TOML table, holding exactly ``keys``, each a non-empty string; else an
    :class:`~rageval.core.errors.InputError` naming the file and the key."""
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise InputError(f"not a valid TOML prompt: {error}", path=source) from None
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise InputError(f"unknown key; expected keys: {', '.join(keys)}", path=source,
                         field=unknown[0])
    for key in keys:
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise InputError("missing or empty (a string)", path=source, field=key)
    return table


def template_of(table: dict[str, Any], source: str, inputs: Sequence[str]) -> str:
    """The table's ``template`` (blank lines around it dropped), holding each placeholder of
    ``inputs`` exactly once and no other."""
    template = str(table["template"]).strip("\n")
    seen = [match.group(1) for match in PLACEHOLDER.finditer(template)]
    for name in inputs:
        if seen.count(name) != 1:
            raise InputError(f"must hold the placeholder {{{name}}} once, found "
                             f"{seen.count(name)}", path=source, field="template")
    extra = sorted(set(seen) - set(inputs))
    if extra:
        raise InputError(f"unknown placeholder {{{extra[0]}}}; known: {', '.join(inputs)}",
                         path=source, field="template")
    return template


_MARKER = "faithfulness.toml"  # a built-in rubric, present in every copy


def builtin_prompts() -> Any:
    """The directory of the built-in prompt files (an importlib.resources Traversable): the
    rubrics, and the pairwise prompt under ``pairwise/``.

    They live in the repository's top-level ``prompts/``, where people who tune prompts find
    them; a wheel carries them as package data in ``rageval/prompts/`` (pyproject maps one onto
    the other), and a source checkout (an editable install) reads the folder itself.
    """
    # Told apart by a file every copy holds: a stray empty folder must not shadow the real one.
    packaged = resources.files("rageval").joinpath("prompts")
    if packaged.joinpath(_MARKER).is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "prompts"
    if checkout.joinpath(_MARKER).is_file():
        return checkout
    raise UsageError(f"the built-in prompts are missing: neither {packaged} nor {checkout} "
                     f"holds {_MARKER} (a broken install? reinstall rageval)")


def file_hash(data: bytes) -> str:
    """SHA-256 (hex) of a rubric file's bytes, CRLF line endings read as LF."""
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


class HashedPrompt(Protocol):
    """A prompt file as the manifest names it (a rubric, the pairwise prompt, a claim step)."""

    version: str
    hash: str
    source: str


def prompt_info(prompt: HashedPrompt) -> dict[str, str]:
    """What the manifest records of a rubric or prompt file: its version, content hash and
    file."""
    return {"version": prompt.version, "hash": prompt.hash, "source": prompt.source}
