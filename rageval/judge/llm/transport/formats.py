"""Reply formats: how the judge is asked for structured output, and how a refusal looks.

Servers disagree on structured output:

- OpenAI, vLLM and Ollama (0.5 and later) take ``response_format: {"type": "json_schema",
  ...}``; Ollama's older releases take only ``json_object``, and ignore a type they do not know;
- llama.cpp's own ``llama-server`` takes ``json_schema`` and ``json_object`` with the schema in
  its own ``schema`` field (both turned into a grammar), and answers an unknown type with a 400
  ``invalid_request_error``;
- llama-cpp-python's server takes only ``json_object`` (with or without ``schema``) and answers
  ``json_schema`` with an HTTP 500 (its request model refuses the type);
- some proxies take nothing.

The judge therefore speaks four *wire formats*, most constrained first:

``json_schema``         OpenAI's strict JSON schema
``json_object+schema``  ``{"type": "json_object", "schema": ...}`` (llama.cpp's form; the
                        schema carries length bounds, see :func:`bounded`)
``json_object``         plain JSON mode, no schema
``text``                no ``response_format`` at all; the tolerant parser reads the reply

A *mode* (``--judge-response-format``) is the ladder of wire formats the client may use:
``auto`` steps down all four, ``json_object`` tries the schema-carrying form and then the plain
one, ``json_schema`` and ``text`` are one step each. The wire format a reply was produced under
is part of its cache key (the request sent is different), so a replay finds each reply under
the format that produced it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rageval.core.errors import UsageError
from rageval.judge.llm.cache.entries import KeyParts, encode_format, request_key_parts

__all__ = ["LADDERS", "MODES", "WIRE_FORMATS", "ReplySchema", "is_refusal"]

WIRE_FORMATS = ("json_schema", "json_object+schema", "json_object", "text")
MODES = ("auto", "json_schema", "json_object", "text")
LADDERS: dict[str, tuple[str, ...]] = {
    "auto": WIRE_FORMATS,
    "json_schema": ("json_schema",),
    "json_object": ("json_object+schema", "json_object"),
    "text": ("text",),
}

# A refusal names what it refuses. Statuses: 400 (OpenAI, proxies), 422 (request validation
# in FastAPI servers), 500 (llama-cpp-python raises on an unknown response_format type).
_REFUSAL_STATUSES = (400, 422, 500)
_NAMES_FORMAT = re.compile(
    r"response_format|json_schema|json_object|structured output|guided_(?:json|decoding)"
    r"|\bgrammar\b", re.IGNORECASE)


@dataclass(frozen=True)
class ReplySchema:
    """The JSON schema of the reply a prompt asks for, and its name (for ``json_schema``)."""

    name: str
    schema: dict[str, Any]
    # Wire format -> its encoding for cache keys, filled as asked (the schema is not changed
    # after construction, so neither is its encoding).
    _encoded: dict[str, str] = field(default_factory=dict, init=False, repr=False,
                                     compare=False)
    # Sample index -> the (model, ladder, parameters) a request was last keyed with and their
    # key parts: every request of a run's rubric shares them (see key_parts).
    _parts: dict[int, tuple[str, tuple[str, ...], dict[str, Any], KeyParts]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def wire(self, fmt: str) -> dict[str, Any] | None:
        """The ``response_format`` sent in wire format ``fmt`` (None: none is sent)."""
        if fmt == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": self.name, "strict": True, "schema": self.schema}}
        if fmt == "json_object+schema":
            return {"type": "json_object", "schema": bounded(self.schema)}
        if fmt == "json_object":
            return {"type": "json_object"}
        if fmt == "text":
            return None
        raise ValueError(f"unknown wire format {fmt!r}")

    def wires(self, formats: tuple[str, ...]) -> dict[str, dict[str, Any] | None]:
        return {fmt: self.wire(fmt) for fmt in formats}

    def encoded_wires(self, formats: tuple[str, ...]) -> dict[str, str]:
        """:meth:`wires` as they enter cache keys (see
        :func:`~rageval.judge.llm.cache.entries.encode_format`), each encoded once per schema."""
        out = {}
        for fmt in formats:
            text = self._encoded.get(fmt)
            if text is None:
                try:
                    text = self._encoded[fmt] = encode_format(self.wire(fmt))
                except (TypeError, ValueError) as exc:  # as cache keys report it
                    raise UsageError(f"response format is not JSON-serialisable: {exc}") \
                        from None
            out[fmt] = text
        return out

    def key_parts(self, model: str, ladder: tuple[str, ...], params: dict[str, Any],
                  sample: int) -> KeyParts:
        """The :func:`~rageval.judge.llm.cache.entries.request_key_parts` of a request in
        this schema's wire formats ``ladder`` (its keys and its id), made once for as long as
        the model, ladder and parameters stay the same."""
        kept = self._parts.get(sample)
        if (kept is not None and kept[0] == model and kept[1] == ladder
                and _same_scalars(kept[2], params)):
            return kept[3]
        parts = request_key_parts(model, params, self.encoded_wires(ladder), sample)
        self._parts[sample] = (model, ladder, params, parts)
        return parts


_SCALARS = (str, int, float, bool, type(None))


def _same_scalars(kept: dict[str, Any], params: dict[str, Any]) -> bool:
    """Whether ``params`` is ``kept`` value for value and type for type (``0`` and ``0.0``,
    equal in Python, are not in a cache key), both holding scalars alone (others are never
    taken as the same: a key is then made anew)."""
    if len(kept) != len(params):
        return False
    for name, value in params.items():
        if type(value) not in _SCALARS or name not in kept:
            return False
        old = kept[name]
        if type(old) is not type(value) or old != value:
            return False
    return True


# Bounds a grammar-enforcing server (llama.cpp) writes into its grammar, so that a small model
# looping inside a string or a list must close its JSON before the token limit cuts it. Sent
# only in llama.cpp's own form: OpenAI's strict json_schema does not take maxLength.
TEXT_MAX_CHARS = 500  # free text (the reasoning): two or three sentences
ITEM_MAX_CHARS = 300  # one item of a list (a claim, a nugget)
LIST_MAX_ITEMS = 30  # AutoNuggetizer keeps 30 nuggets at most


def bounded(schema: dict[str, Any], *, in_list: bool = False) -> dict[str, Any]:
    """``schema`` with a ``maxLength`` on every free-text string and a ``maxItems`` on every
    list (strings with an ``enum`` are bounded already)."""
    out = dict(schema)
    kind = out.get("type")
    if kind == "string" and "enum" not in out:
        out.setdefault("maxLength", ITEM_MAX_CHARS if in_list else TEXT_MAX_CHARS)
    elif kind == "array":
        out.setdefault("maxItems", LIST_MAX_ITEMS)
        if isinstance(out.get("items"), dict):
            out["items"] = bounded(out["items"], in_list=True)
    elif kind == "object" and isinstance(out.get("properties"), dict):
        out["properties"] = {k: bounded(v) if isinstance(v, dict) else v
                             for k, v in out["properties"].items()}
    return out


def is_refusal(status: int, message: str) -> bool:
    """Whether an error reply refuses the ``response_format`` it was sent (and so says
    nothing about the request otherwise)."""
    return status in _REFUSAL_STATUSES and _NAMES_FORMAT.search(message) is not None
