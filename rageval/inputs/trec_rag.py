"""TREC RAG 2024 generation runs (the AG and RAG tasks' submission format) as records.

One JSON line per topic::

    {"run_id": "my-run", "topic_id": "2027497", "topic": "how often should you ...",
     "references": ["msmarco_v2.1_doc_51_766815931#2_1606878413", ...],
     "response_length": 192,
     "answer": [{"text": "The frequency ... readiness.", "citations": [0, 1]}, ...]}

``citations`` index ``references`` from 0. A record gets ``id`` = topic_id, ``query`` = topic,
``contexts`` = the references in order (texts from a corpus when one is given, else empty),
and ``answer`` = the sentences joined with spaces, each followed by its citations as rageval's
markers: citation ``i`` becomes ``[i+1]``, the 1-based rank that rageval's ``citations:*``
metrics read. Those metrics read a marker as a context id first, so where ``i+1`` is also the
id of another reference the marker names the cited id instead (``[17]`` for a reference whose
id is 17). Every other key (``run_id``, ``response_length``, ...) goes to the record's extra
fields. A file holds one run: a second ``run_id`` is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rageval.core.errors import InputError, UsageError
from rageval.core.records.model import Record
from rageval.core.records.validation import validate_records
from rageval.inputs.columns import renamed_errors
from rageval.inputs.files import iter_raw
from rageval.inputs.texts import read_corpus

__all__ = ["load_trec_rag"]

_RENAMES = {"id": "topic_id", "query": "topic", "contexts": "references"}
_OWN_KEYS = frozenset({"topic_id", "topic", "references", "answer"})
_RESERVED = frozenset({"id", "query", "contexts", "reference", "judgments"})
_UNSAFE = frozenset(",;[]")  # characters that end a citation token in rageval's reader


def _error(message: str, path: str, line: int, field: str) -> InputError:
    return InputError(message, path=path, line=line, field=field)


def _references(value: Any, path: str, line: int) -> list[str]:
    if not isinstance(value, list):
        raise _error(f"expected a list of segment ids, found {type(value).__name__}", path,
                     line, "references")
    seen: dict[str, int] = {}
    for index, ref in enumerate(value):
        if not isinstance(ref, str) or not ref:
            raise _error(f"expected a non-empty string, found {ref!r}"[:120], path, line,
                         f"references[{index}]")
        first = seen.setdefault(ref, index)
        if first != index:
            raise _error(f"duplicate reference {ref!r} (also references[{first}])", path, line,
                         f"references[{index}]")
    return value


def _marker(index: int, references: Sequence[str], ids: set[str],
            where: tuple[str, int, str]) -> str:
    """The marker citing ``references[index]``: its 1-based rank, or its id where the rank is
    also another reference's id (rageval's reader tries ids first)."""
    rank = str(index + 1)
    ref = references[index]
    if rank not in ids or ref == rank:
        return f"[{rank}]"
    if ref != ref.strip() or _UNSAFE.intersection(ref):
        raise _error(f"cannot cite reference {ref!r}: [{rank}] names the reference whose id "
                     f"is {rank!r}, and this id cannot be written in a marker", *where)
    return f"[{ref}]"


def _answer(value: Any, references: Sequence[str], path: str, line: int) -> str:
    """The answer sentences joined, each followed by its citation markers."""
    if not isinstance(value, list):
        raise _error(f"expected a list of sentences, found {type(value).__name__}", path, line,
                     "answer")
    ids = set(references)
    parts: list[str] = []
    for index, sentence in enumerate(value):
        field = f"answer[{index}]"
        if not isinstance(sentence, dict):
            raise _error("expected an object with 'text' and 'citations'", path, line, field)
        text = sentence.get("text")
        if not isinstance(text, str):
            raise _error(f"expected a string, found {text!r}"[:120], path, line, f"{field}.text")
        citations = sentence.get("citations")
        citations = [] if citations is None else citations
        if not isinstance(citations, list):
            raise _error("expected a list of reference indices", path, line,
                         f"{field}.citations")
        markers = []
        for position, cite in enumerate(citations):
            where = (path, line, f"{field}.citations[{position}]")
            if isinstance(cite, bool) or not isinstance(cite, int):
                raise _error(f"expected an integer, found {cite!r}"[:120], *where)
            if not 0 <= cite < len(references):
                count = f"{len(references)} reference{'s' if len(references) != 1 else ''}"
                raise _error(f"citation {cite} is out of range: the topic has {count} "
                             "(indices from 0)", *where)
            markers.append(_marker(cite, references, ids, where))
        part = " ".join(piece for piece in (text.strip(), "".join(markers)) if piece)
        if part:
            parts.append(part)
    return " ".join(parts)


def _topic(item: Any, path: str, line: int) -> Any:
    """One line's record in rageval's JSON form (a non-object is left for validation)."""
    if not isinstance(item, dict):
        return item
    for key in ("topic_id", "references", "answer"):
        if key not in item:
            raise _error(f"missing required field {key!r}", path, line, key)
    references = _references(item["references"], path, line)
    out: dict[str, Any] = {"id": item["topic_id"]}
    if "topic" in item:
        out["query"] = item["topic"]
    out["contexts"] = [{"id": ref, "text": ""} for ref in references]
    out["answer"] = _answer(item["answer"], references, path, line)
    for key, value in item.items():
        if key in _RESERVED:
            raise _error(f"key {key!r} is a rageval field, not part of the TREC RAG format; "
                         "remove it", path, line, key)
        if key not in _OWN_KEYS:
            out[key] = value  # run_id, response_length, anything else: kept
    return out


def _check_run_id(rows: list[tuple[int, Any]], path: str) -> None:
    first: tuple[int, Any] | None = None
    for line, item in rows:
        if not isinstance(item, dict) or "run_id" not in item:
            continue
        if not isinstance(item["run_id"], str) or not item["run_id"]:
            raise _error(f"expected a non-empty string, found {item['run_id']!r}"[:120], path,
                         line, "run_id")
        if first is None:
            first = (line, item["run_id"])
        elif item["run_id"] != first[1]:
            raise _error(f"a second run {item['run_id']!r} (line {first[0]} is run "
                         f"{first[1]!r}); a file holds one run", path, line, "run_id")


def _fill_texts(rows: list[tuple[int, Any]], corpus: str, path: str, limit: int) -> None:
    needed = {c["id"] for _, row in rows if isinstance(row, dict) for c in row["contexts"]}
    texts = read_corpus(corpus, needed, limit)
    for line, row in rows:
        if not isinstance(row, dict):
            continue
        for index, context in enumerate(row["contexts"]):
            if context["id"] not in texts:
                raise _error(f"document {context['id']!r} is not in the corpus {corpus}",
                             path, line, f"references[{index}]")
            context["text"] = texts[context["id"]]


def load_trec_rag(path: str, format: str | None, limit: int,
                  corpus: str | None = None) -> list[Record]:
    """The records of a TREC RAG 2024 generation run file (JSON Lines, whatever the
    extension; ``format="json"`` also reads a JSON array)."""
    fmt = "jsonl" if format is None else format
    if fmt not in ("jsonl", "json"):
        raise UsageError(f"a TREC RAG run is JSON Lines (format 'jsonl' or 'json'), not {fmt!r}")
    raw = list(iter_raw(path, fmt, limit))
    _check_run_id(raw, path)
    rows = [(line, _topic(item, path, line)) for line, item in raw]
    if corpus is not None and rows:
        _fill_texts(rows, corpus, path, limit)
    return list(renamed_errors(validate_records(iter(rows), path, "line"), _RENAMES))
