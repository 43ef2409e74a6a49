"""What a record field was likely meant to be, for errors about a field no record has.

A record's unknown top-level keys are kept (``Record.extra``); when a metric needs a field that
no record has, those keys often hold it under another name: a typo (``judgements``) or another
tool's name for it (ragas's ``question``, ``ground_truth``). The hint names the key found and
the option that reads it as the field.
"""

from __future__ import annotations

from collections.abc import Iterable

from rageval.core.errors import close_matches

# Other tools' names for rageval's fields (ragas before and after 0.2, HF datasets, TREC RAG).
ALIASES: dict[str, tuple[str, ...]] = {
    "query": ("question", "user_input", "topic", "prompt", "input"),
    "contexts": ("retrieved_contexts", "context", "documents", "passages", "references"),
    "answer": ("response", "output", "prediction", "generated_answer"),
    "reference": ("ground_truth", "ground_truths", "references_answer", "expected_output",
                  "gold_answer", "target"),
    "judgments": ("qrels", "relevance", "labels"),
}


def field_hint(needed: str, keys: Iterable[str]) -> str:
    """`` (records have 'judgements': ...)`` when one of ``keys`` looks like ``needed``; else
    an empty string."""
    found = sorted(set(keys))
    aliases = [key for key in found if key.lower() in ALIASES.get(needed, ())]
    close = close_matches(needed, found, cutoff=0.75)
    candidate = (close or aliases or [None])[0]
    if candidate is None:
        return ""
    return (f" (records have '{candidate}': if that is the {needed}, rename it or read it with "
            f"--map {needed}={candidate})")
