"""The user message of a judge prompt laid out for prefix caches: what every request of the
prompt shares first, the record last.

Servers with a prefix cache (OpenAI's prompt caching, vLLM's automatic prefix caching,
llama.cpp's prompt cache) evaluate once the longest prefix a request shares with one seen
before, and providers bill those tokens at a discount. A judge prompt's system message depends
on the prompt file alone; :func:`fixed_first` lays out the user message the same way: the
template's instructions (its text up to the paragraph that holds its first placeholder), then
the reply instructions, and only then the record: what comes before it (the turns before a turn
of a conversation) and the template's remaining paragraphs, each placeholder replaced by its
slots. Nothing after the first text that depends on the record is the same for every request,
except the labels the template puts between the record's fields.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from rageval.judge.prompting.slots import PLACEHOLDER

__all__ = ["fixed_first", "split_template"]


def split_template(template: str) -> tuple[str, str]:
    """``template`` cut before the paragraph that holds its first placeholder: (instructions,
    the record's part); ``("", template)`` when that paragraph is the first."""
    first = PLACEHOLDER.search(template)
    if first is None:
        return template, ""
    cut = template.rfind("\n\n", 0, first.start())
    if cut < 0:
        return "", template
    return template[:cut], template[cut + 2:]


def fixed_first(template: str, blocks: Mapping[str, str], reply: str, before: str = "") -> str:
    """The user message: the template's instructions, the reply instructions ``reply``, then
    ``before`` (record text shown ahead of the template's fields, if any) and the template's
    part with the record's fields, each ``{name}`` replaced by ``blocks[name]``; paragraphs
    joined by a blank line."""
    head, pieces = _template_parts(template)
    fields = "".join([blocks[piece] if i % 2 else piece for i, piece in enumerate(pieces)])
    return "\n\n".join(part for part in (head, reply, before, fields) if part)


@functools.lru_cache(maxsize=256)
def _template_parts(template: str) -> tuple[str, tuple[str, ...]]:
    """``template``'s instructions, and its part with the record's fields cut at each
    placeholder: text, name, text, ... (cut once per template, not once per request)."""
    head, rest = split_template(template)
    return head, tuple(PLACEHOLDER.split(rest))
