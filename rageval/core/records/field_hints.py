"""Whether a run's records have the fields its metrics need (:class:`NeededFields`), and what
a record field was likely meant to be, for errors about a field no record has.

A record's unknown top-level keys are kept (``Record.extra``); when a metric needs a field that
no record has, those keys often hold it under another name: a typo (``judgements``) or another
tool's name for it (ragas's ``question``, ``ground_truth``). The hint names the key found and
the option that reads it as the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rageval.core.errors import UsageError, close_matches
from rageval.core.records.model import Record

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


class NeededFields:
    """The fields each metric of a run needs (``needs``: metric name -> fields), held against
    the records: a run held whole is checked at once (:meth:`require`), one read window by
    window as the windows pass (:meth:`note`) and at its end (:meth:`check`)."""

    def __init__(self, needs: Mapping[str, Iterable[str]]) -> None:
        self.needs = {metric: frozenset(fields) for metric, fields in needs.items()}
        self._found: set[str] = set()  # the needed fields some record had
        self._extra_keys: set[str] = set()

    def require(self, records: Sequence[Record], but: str | None = None) -> None:
        """Stop before scoring when a metric could not score a single record (``but``: a
        field left for later, when something is about to fill it)."""
        for metric, fields in self.needs.items():
            for needed in sorted(fields - {but}):
                if not any(r.has(needed) for r in records):
                    keys = {key for r in records for key in r.extra}
                    raise missing_field(metric, needed, keys)

    def note(self, records: Sequence[Record]) -> None:
        """Which needed fields a window's records have."""
        wanted = {field for fields in self.needs.values() for field in fields} - self._found
        self._found.update(field for field in wanted if any(r.has(field) for r in records))
        self._extra_keys.update(key for r in records for key in r.extra)

    def check(self) -> None:
        """After a run of several windows: a metric whose inputs no record had is an error."""
        for metric, fields in self.needs.items():
            for needed in sorted(fields - self._found):
                raise missing_field(metric, needed, self._extra_keys)


def missing_field(metric: str, needed: str, extra_keys: set[str]) -> UsageError:
    """The error for a metric whose field no record has, with a hint where one fits."""
    hint = field_hint(needed, extra_keys) or {
        "judgments": " (or give --qrels)",
        "contexts": " (every record's contexts list is empty)",
    }.get(needed, "")
    return UsageError(f"metric {metric} needs '{needed}', and no record has it{hint}")
