"""The ROUGE base metric: the parameters every ROUGE metric shares, its outputs and signature,
and how per-pair counts become values (rouge-score's float arithmetic, the best reference).

Parameters, shared by all of them:

``stem`` (default ``false``)
    Porter stemming (NLTK's ``PorterStemmer``) of tokens longer than 3 characters, as
    rouge-score's ``use_stemmer=True``. The NLTK version is then part of the signature.
``tokenizer`` (default ``default``)
    ``default`` is rouge-score's: lowercase, then every run of ASCII letters and digits is a
    token; everything else separates tokens, so text without ASCII letters or digits (Chinese,
    Russian, Greek, ...) has no tokens at all and scores 0, even against itself. ``unicode``
    keeps letters, combining marks and digits of every script: the text is NFKC-normalised and
    lowercased, every run of letters/marks/digits is a token, and each Han ideograph, hiragana
    or katakana character is a token of its own (those scripts do not separate words with
    spaces). With ``stem=true`` only ASCII tokens are stemmed. Not comparable with rouge-score;
    the Unicode version of the character tables is part of the signature.

Multiple references: the reference with the highest F-measure gives all three values (the first
such reference on ties), as rouge-score's ``score_multi``; each metric chooses on its own.
A record without an answer or without a reference is unscored, with that reason.
"""

from __future__ import annotations

import unicodedata
from abc import abstractmethod
from importlib import metadata
from typing import ClassVar

import numpy as np

from rageval.core.metric import Batch, Metric, MetricResult
from rageval.core.params import Param
from rageval.core.scale import RATIO
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__
from rageval.generation.rouge.pairs import _Pairs, batch_pairs
from rageval.generation.rouge.tokenization import TOKENIZERS

#: The rouge-score release whose values these metrics reproduce exactly.
ROUGE_SCORE_SEMANTICS = "0.1.2"

_STEM = Param(
    "stem",
    bool,
    False,
    "Porter-stem tokens longer than 3 characters (rouge-score use_stemmer)",
)
_TOKENIZER = Param(
    "tokenizer",
    str,
    "default",
    "default = rouge-score's (lowercased ASCII letters and digits only); unicode = letters, "
    "marks and digits of every script, NFKC + lowercase, one token per Han/kana character",
    choices=TOKENIZERS,
)


def prf(
    hits: np.ndarray, target_total: np.ndarray, pred_total: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F-measure with rouge-score's exact float operations.

    ``hits / max(total, 1)`` (a total of 0 means hits of 0, so the floor changes nothing for
    LCS) and ``2 * p * r / (p + r)``, 0 when ``p + r`` is 0.
    """
    precision = hits / np.maximum(pred_total, 1)
    recall = hits / np.maximum(target_total, 1)
    total = precision + recall
    positive = total > 0
    fmeasure = np.zeros(len(hits), dtype=np.float64)
    fmeasure[positive] = 2 * precision[positive] * recall[positive] / total[positive]
    return precision, recall, fmeasure


def best_reference(fmeasure: np.ndarray, record: np.ndarray, n_records: int) -> np.ndarray:
    """Per record, the pair index of its first reference with the highest F-measure (-1: none).

    rouge-score's ``score_multi``: ``np.argmax`` over the references' F-measures.
    """
    best = np.full(n_records, -1, dtype=np.int64)
    # One reference each: nothing to choose (bincount: np.unique would load numpy.ma).
    if np.bincount(np.asarray(record, dtype=np.int64), minlength=1).max() <= 1:
        best[record] = np.arange(len(record))
        return best
    best_f = [-1.0] * n_records
    for p, (r, f) in enumerate(zip(record.tolist(), fmeasure.tolist(), strict=True)):
        if f > best_f[r]:
            best_f[r] = f
            best[r] = p
    return best


class Rouge(Metric):
    """Base of the ROUGE metrics: pairs, best reference, components, signature."""

    family = "lexical"
    value_range = RATIO
    libraries = ("nltk",)  # its Porter stemmer, with stem=true
    params = (_STEM, _TOKENIZER)
    needs = frozenset({"answer", "reference"})
    variant: ClassVar[str]  # signature: "n2", "lcs", "lcs-summary"
    summary_level: ClassVar[bool] = False

    @property
    def stem(self) -> bool:
        return bool(self.values["stem"])

    @property
    def tokenizer(self) -> str:
        return str(self.values["tokenizer"])

    def output_names(self) -> list[str]:
        name = str(self.name)
        return [name, f"{name}.precision", f"{name}.recall", f"{name}.fmeasure"]

    def signature(self) -> Signature:
        fields = [
            Field("metric", self.base, "m"),
            Field("variant", self.variant, "var"),
            Field("stem", "true" if self.stem else "false", "stem"),
            Field("tokenizer", self.tokenizer, "tok"),
            Field("rouge-score", ROUGE_SCORE_SEMANTICS, "rs", version=True),
        ]
        if self.stem:
            fields.append(Field("nltk", _nltk_version(), "nltk", version=True))
        if self.tokenizer == "unicode":
            fields.append(Field("unicode", unicodedata.unidata_version, "uni", version=True))
        fields.append(Field("rageval", __version__, "v", version=True))
        return Signature.of(fields)

    def score(self, batch: Batch) -> MetricResult:
        pairs = batch_pairs(batch, self.tokenizer, self.stem, self.summary_level)
        precision, recall, fmeasure = prf(*self.counts(pairs))
        best = best_reference(fmeasure, pairs.record, len(batch))
        scored = best >= 0
        names = self.output_names()
        values = {}
        for name, column in zip(names, (fmeasure, precision, recall, fmeasure), strict=True):
            out = np.full(len(batch), np.nan)
            out[scored] = column[best[scored]]
            values[name] = out
        return MetricResult(values, list(pairs.reasons))

    @abstractmethod
    def counts(self, pairs: _Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per pair: matches, reference total, answer total (exact integers)."""


def _nltk_version() -> str:
    try:
        return metadata.version("nltk")
    except metadata.PackageNotFoundError:
        return "unknown"
