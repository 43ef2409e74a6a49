"""Untrusted texts in judge prompts: template placeholders, escaping and nonce-tagged slots.

Texts under judgement are untrusted. A prompt template names each input with a ``{name}``
placeholder (:data:`PLACEHOLDER`); rendering replaces it with the input's slot block
(:func:`slot_block`): each text in its own tagged slot whose tag carries a nonce derived from the
content (:func:`slot_nonce`: deterministic, so cache keys are stable, and not predictable by the
text it is derived from), escaped with :func:`escape` so that it contains no ``<`` at all: a
forged closing tag cannot end its slot. Rubric prompts (:mod:`rageval.judge.rubric.render`) and the
pairwise prompt (:mod:`rageval.judge.pairwise.prompt`) both build their slots here.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["PLACEHOLDER", "escape", "slot", "slot_block", "slot_nonce", "unescape"]

#: A ``{name}`` placeholder of a prompt template.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NONCE_HEX = 12

_ESCAPE = re.compile(r"<|&(?=amp;|lt;)")
_UNESCAPE = re.compile(r"&(amp|lt);")


def escape(text: str) -> str:
    """Make ``text`` safe to put inside a slot: it will contain no ``<`` at all.

    ``<`` becomes ``&lt;``; an ``&`` becomes ``&amp;`` only where it would otherwise start
    ``&lt;`` or ``&amp;``, so ordinary text (``AT&T``) is left as written and
    :func:`unescape` restores the original exactly.
    """
    if "<" not in text and "&" not in text:  # most texts: nothing to escape
        return text
    return _ESCAPE.sub(lambda match: "&lt;" if match.group() == "<" else "&amp;", text)


def unescape(text: str) -> str:
    """Invert :func:`escape`: ``unescape(escape(s)) == s`` for every string ``s``."""
    return _UNESCAPE.sub(lambda match: "<" if match.group(1) == "lt" else "&", text)


def slot_nonce(prompt_hash: str, texts: dict[str, list[str]]) -> str:
    """A nonce derived from the prompt file's hash and every slot's text (length-prefixed,
    unambiguous): deterministic, and not predictable by the texts it is derived from."""
    # The pieces are joined and hashed at once: the digest of their concatenation is the
    # digest of feeding them one by one, for a fraction of the calls.
    pieces = [prompt_hash.encode()]
    for name, values in texts.items():
        name_part = name.encode()
        name_length = len(name_part).to_bytes(8, "big")
        for value in values:
            part = value.encode("utf-8", "surrogatepass")
            pieces += (name_length, name_part, len(part).to_bytes(8, "big"), part)
    return hashlib.sha256(b"".join(pieces)).hexdigest()[:_NONCE_HEX]


def slot(tag: str, nonce: str, text: str, attributes: str = "") -> str:
    """One untrusted text, escaped, inside ``<tag-NONCE ...>`` ... ``</tag-NONCE>``."""
    return f"<{tag}-{nonce}{attributes}>\n{escape(text)}\n</{tag}-{nonce}>"


def slot_block(name: str, values: list[str], nonce: str) -> str:
    """The slots of one input: a context slot per context (with its rank), a reference slot per
    reference (numbered when there are several), else one slot named after the input."""
    if name == "contexts":
        return "\n".join(
            slot("context", nonce, text, f' rank="{rank}"') for rank, text in enumerate(values, 1)
        )
    if name == "reference" and len(values) > 1:
        return "\n".join(
            slot("reference", nonce, text, f' n="{n}"') for n, text in enumerate(values, 1)
        )
    return slot(name, nonce, values[0])
