"""What the judge's prompt files share: a TOML table of string fields and a template that places
each of its inputs exactly once (the pairwise prompt, the claim-level steps)."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rageval.core.errors import InputError
from rageval.judge.slots import PLACEHOLDER

__all__ = ["NOT_RUBRICS", "SHORT_HASH", "PromptFile", "read_table", "template_of"]

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
