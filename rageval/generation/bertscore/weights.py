"""Token weights: bert-score's plain weights (1, and 0 for the special tokens), or idf over the
references of the whole run (bert-score's ``idf=True``)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from rageval.core.metric import Batch, RunPass, answer_reference_reason
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


def _idf_weights(engine: _Engine, batch: Batch) -> TokenWeights:
    """Each token's idf ``log((M + 1) / (m + 1))`` over every reference of the run, not just
    one batch's, as bert-score does: the run's pass (:class:`DocumentFrequencies`)."""
    docs, counts = batch.passed(DocumentFrequencies(engine))
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


class DocumentFrequencies(RunPass[tuple[int, Counter[int]]]):
    """bert-score's ``get_idf_dict`` over the references of the run's scorable records, window
    by window: the number of references, and per token the number of references holding it.
    Tokens only (no embedding), so the pass costs a tokenisation of the references."""

    def __init__(self, engine: _Engine) -> None:
        self.engine = engine
        self.key = ("bertscore-idf", engine.namespace)  # one pass per model and layer
        self.docs = 0
        self.counts: Counter[int] = Counter()

    def add(self, records: Sequence[Record]) -> None:
        references = [ref.strip() for r in records if answer_reference_reason(r) is None
                      for ref in r.references]
        known: dict[str, np.ndarray] = {}
        for text in set(references):
            entry = _MEMORY.get((self.engine.namespace, text))
            if entry is not None:
                known[text] = entry.ids
        missing = [t for t in dict.fromkeys(references) if t not in known]
        for text, (ids, _full) in zip(missing, self.engine.encode(missing), strict=True):
            known[text] = ids
        for text in references:
            self.counts.update(set(known[text].tolist()))
        self.docs += len(references)

    def result(self) -> tuple[int, Counter[int]]:
        return self.docs, self.counts
