"""Token weights: bert-score's plain weights (1, and 0 for the special tokens), or idf over the
references of the whole run (bert-score's ``idf=True``)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from rageval.core.metric import Batch, answer_reference_reason
from rageval.generation.bertscore.embeddings import _MEMORY

if TYPE_CHECKING:
    from rageval.core.records import Record
    from rageval.generation.bertscore.engine import _Engine

TokenWeights = Callable[[np.ndarray], np.ndarray]  # a text's token ids -> one weight per token


def _special_token_weights(engine: _Engine) -> TokenWeights:
    """Weight 1 for every token but [CLS] and [SEP] (or <s> and </s>), which weigh 0."""
    special = engine.special_ids

    def plain(ids: np.ndarray) -> np.ndarray:
        w = np.ones(len(ids), dtype=np.float64)
        if len(ids):
            w[np.isin(ids, special)] = 0.0
        return w

    return plain


def _idf_weights(engine: _Engine, run: Batch) -> TokenWeights:
    """Each token's idf ``log((M + 1) / (m + 1))`` over every reference of the run, not just
    one batch's, as bert-score does (computed once per run and model)."""
    docs, counts = run.cached(("bertscore-idf", engine.namespace),
                              lambda: _document_frequencies(engine, run.records))
    unseen = math.log(docs + 1)
    table: dict[int, float] = {}

    def idf(ids: np.ndarray) -> np.ndarray:
        out = np.empty(len(ids), dtype=np.float64)
        for k, token in enumerate(ids.tolist()):
            w = table.get(token)
            if w is None:
                c = counts.get(token)
                w = table[token] = unseen if c is None else math.log((docs + 1) / (c + 1))
            out[k] = w
        return out

    return idf


def _document_frequencies(engine: _Engine, records: Sequence[Record]) -> tuple[int, Counter]:
    """bert-score's ``get_idf_dict`` over the references of the scored records: the number of
    references, and per token the number of references containing it."""
    references = [ref.strip() for r in records if answer_reference_reason(r) is None
                  for ref in r.references]
    known: dict[str, np.ndarray] = {}
    for text in set(references):
        entry = _MEMORY.get((engine.namespace, text))
        if entry is not None:
            known[text] = entry.ids
    missing = [t for t in dict.fromkeys(references) if t not in known]
    for text, (ids, _full) in zip(missing, engine.encode(missing), strict=True):
        known[text] = ids
    counts: Counter = Counter()
    for text in references:
        counts.update(set(known[text].tolist()))
    return len(references), counts
