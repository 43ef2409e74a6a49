"""The (reference, answer) pairs of a batch, each distinct text tokenised once and shared by
every ROUGE metric of the batch that uses the same tokenizer and stemming."""

from __future__ import annotations

import functools
import itertools
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rageval.core.metric import Batch, Slot, answer_reference_reason
from rageval.generation.rouge.tokenization import Token, _tokens


@dataclass(frozen=True)
class _Pairs:
    """Every (reference, answer) pair of a batch, as indices into distinct tokenised texts.

    Pairs come in record order, then reference order. Token ids are interned per batch, so
    comparing ids compares tokens. ``texts`` holds each distinct text's token ids or, when
    ``sentences`` is set (``rougeLsum``), its sentences' token ids.
    """

    texts: list[list[int]] | list[list[list[int]]]
    sentences: bool
    vocab_size: int
    target: np.ndarray  # text index of each pair's reference
    prediction: np.ndarray  # text index of each pair's answer
    record: np.ndarray  # record index of each pair
    reasons: list[str | None]  # per record: why it is unscored, or None

    def __len__(self) -> int:
        return len(self.target)

    @functools.cached_property
    def lengths(self) -> np.ndarray:
        """Tokens per text (all its sentences together with ``sentences``)."""
        if self.sentences:
            return np.array([sum(map(len, t)) for t in self.texts], dtype=np.int64)
        return np.fromiter(map(len, self.texts), dtype=np.int64, count=len(self.texts))

    @functools.cached_property
    def flat(self) -> np.ndarray:
        """Every text's token ids, concatenated (without ``sentences`` only)."""
        chained = itertools.chain.from_iterable(self.texts)
        return np.fromiter(chained, dtype=np.int64, count=int(self.lengths.sum()))


def _build_pairs(batch: Batch, tokenizer: str, stem: bool, sentences: bool) -> _Pairs:
    vocab: defaultdict[Token, int] = defaultdict(itertools.count().__next__)
    intern = vocab.__getitem__  # a new token gets the next id
    index: dict[str, int] = {}
    texts: list = []

    def ids(text: str) -> list[int]:
        return list(map(intern, _tokens(text, tokenizer, stem)))

    def text_index(text: str) -> int:
        found = index.get(text)
        if found is None:
            found = index[text] = len(texts)
            if sentences:
                # rouge-score: sentences are the non-empty lines, each tokenised on its own.
                texts.append([ids(line) for line in text.split("\n") if line])
            else:
                texts.append(ids(text))
        return found

    target: list[int] = []
    prediction: list[int] = []
    record: list[int] = []
    reasons: list[str | None] = []
    for i, rec in enumerate(batch.records):
        reasons.append(answer_reference_reason(rec))
        if reasons[-1] is not None or rec.answer is None:
            continue
        answer = text_index(rec.answer)
        for reference in rec.references:
            target.append(text_index(reference))
            prediction.append(answer)
            record.append(i)
    return _Pairs(texts, sentences, len(vocab), _int_array(target), _int_array(prediction),
                  _int_array(record), reasons)


def _int_array(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def batch_pairs(batch: Batch, tokenizer: str, stem: bool, sentences: bool = False) -> _Pairs:
    """The batch's tokenised pairs, built once and shared by every ROUGE metric alike."""
    slot = Slot[_Pairs](("rouge-pairs", tokenizer, stem, sentences))
    return batch.cached(slot, lambda: _build_pairs(batch, tokenizer, stem, sentences))
