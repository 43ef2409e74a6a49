"""Reading the replies of claim-level steps, or saying why they cannot be read.

A reply is untrusted text. :func:`parse_texts` reads a list of texts (``{"claims": [...]}``),
:func:`parse_labels` one label per numbered item (``{"verdicts": {"1": "entailment", ...}}``, or
a list of labels in item order). Strict JSON first; otherwise the JSON objects embedded in the
reply that hold the key, of which the first is the reply's own and any later one that says
something else (a verdict quoted from the judged text) makes the reply unusable. A reply with
a label outside the step's set, an item missing or one too many is unusable as a whole: a
partial reading could pair labels with the wrong items. Labels are read case-insensitively,
with spaces and dashes as underscores, and a few unambiguous spellings (``entailed``,
``contradicted``, ``partial``, ``no_support``) are taken for the label they spell.
"""

from __future__ import annotations

from typing import Any

from rageval.judge.prompting.reply_json import conflict, reply_objects, shown

__all__ = ["parse_labels", "parse_texts"]

_SYNONYMS = {
    "entailed": "entailment", "entails": "entailment",
    "contradicted": "contradiction", "contradicts": "contradiction",
    "partial": "partial_support", "partially_supported": "partial_support",
    "no_support": "not_support", "not_supported": "not_support", "unsupported": "not_support",
    "supported": "support",
}


def parse_texts(text: str | None, key: str) -> list[str] | str:
    """The texts listed under ``key`` (blank ones dropped, each stripped), or why none can be
    read. Never raises."""
    found = reply_objects(text, key)
    if isinstance(found, str):
        return found
    first = _texts(found[0], key)
    for later in found[1:]:
        if _texts(later, key) != first:
            return conflict(key, found[0].get(key), later.get(key))
    return first


def _texts(obj: dict[str, Any], key: str) -> list[str] | str:
    if key not in obj:
        return f"the reply's JSON object has no {key!r}"
    value = obj[key]
    if not isinstance(value, list):
        return f"{key!r} is {shown(value)}, not a list"
    out = []
    for n, item in enumerate(value, 1):
        if not isinstance(item, str):
            return f"{key!r} item {n} is {shown(item)}, not a text"
        if item.strip():
            out.append(item.strip())
    return out


def parse_labels(text: str | None, key: str, count: int,
                 labels: tuple[str, ...]) -> list[str] | str:
    """One label of ``labels`` for each of items 1..``count``, in item order, or why the reply
    cannot be read. Never raises."""
    found = reply_objects(text, key)
    if isinstance(found, str):
        return found
    first = _labels(found[0], key, count, labels)
    for later in found[1:]:
        if _labels(later, key, count, labels) != first:
            return conflict(key, found[0].get(key), later.get(key))
    return first


def _labels(obj: dict[str, Any], key: str, count: int,
            labels: tuple[str, ...]) -> list[str] | str:
    if key not in obj:
        return f"the reply's JSON object has no {key!r}"
    value = obj[key]
    if isinstance(value, list):
        items = {str(n): item for n, item in enumerate(value, 1)}
    elif isinstance(value, dict):
        items = {str(k).strip(): item for k, item in value.items()}
    else:
        return f"{key!r} is {shown(value)}, not an object of labels"
    wanted = [str(n) for n in range(1, count + 1)]
    missing = [n for n in wanted if n not in items]
    if missing:
        return f"{key!r} has no label for item {missing[0]} (of {count})"
    extra = sorted(set(items) - set(wanted))
    if extra:
        return f"{key!r} labels an item {extra[0]!r} that was not asked about (of {count})"
    out = []
    for n in wanted:
        label = _label(items[n], labels)
        if label is None:
            return (f"{key!r} item {n} is {shown(items[n])}, not one of "
                    f"{', '.join(labels)}")
        out.append(label)
    return out


def _label(value: Any, labels: tuple[str, ...]) -> str | None:
    if not isinstance(value, str):
        return None
    word = "_".join(value.strip().lower().replace("-", " ").split())
    word = _SYNONYMS.get(word, word)
    return word if word in labels else None
