"""The ROUGE metrics: their base (the parameters every ROUGE metric shares, its outputs and
signature, and how per-pair counts become values: rouge-score's float arithmetic, the best
reference) and the registered metrics, ``rouge1``, ``rouge2`` and any ``rougeN`` (n-gram
overlap), ``rougeL`` (LCS over the whole text) and ``rougeLsum`` (summary-level LCS over
sentences).

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
from rageval.core.registry import register, register_family
from rageval.core.scale import RATIO
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__
from rageval.generation.rouge.lcs import lcs_lengths, summary_lcs
from rageval.generation.rouge.ngrams import ngram_overlap
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


class RougeN(Rouge):
    """ROUGE-N: clipped n-gram overlap between answer and reference (Lin 2004).

    Subclasses set ``n``; :func:`rouge_n_class` builds one for any ``rougeN``.
    """

    n: ClassVar[int]

    def counts(self, pairs: _Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return ngram_overlap(pairs, self.n)


_ROUGE_N_CARD = """ROUGE-{n}: overlap of word {n}-grams between answer and reference (Lin 2004).

    Both texts are tokenised (``tokenizer``, optional Porter ``stem``) and cut into their
    {n}-grams, counted with multiplicity. ``matches`` = sum over n-grams of min(count in answer,
    count in reference). Precision = matches / answer {n}-grams, recall = matches / reference
    {n}-grams (each divided by at least 1), F-measure = 2PR / (P + R) (0 when P + R = 0); the
    headline value ``{name}`` is the F-measure, with ``{name}.precision``, ``{name}.recall``,
    ``{name}.fmeasure`` beside it. Range 0-1. Identical to rouge-score's ``{name}`` (rouge-score
    itself stops at rouge9; larger N follow the same definition).

    Edge cases: {short} has no {n}-grams and scores 0; so do empty and
    punctuation-only texts, and non-Latin text with the default tokenizer. With several
    references the one with the best F-measure counts (the first on ties). Unscored: no
    answer, or no reference.

    Example ({name}): {example}

    Lin, Chin-Yew. 2004. ROUGE: A Package for Automatic Evaluation of Summaries. Text
    Summarization Branches Out (ACL workshop), 74-81.
    """

_ROUGE_N_EXAMPLES = {
    1: 'reference "the cat sat on the mat", answer "the cat lay on the\n    mat": 5 of 6 '
       "unigrams match, P = R = F = 5/6 = 0.8333.",
    2: 'reference "the cat sat on the mat", answer "the cat lay on the\n    mat": the bigrams '
       '"the cat", "on the", "the mat" match, P = R = F = 3/5 = 0.6.',
}


def _rouge_n_summary(n: int) -> str:
    if n == 2:
        return ("ROUGE-2 F-measure: word-bigram overlap with the reference (+ .precision, "
                ".recall, .fmeasure); any rougeN (rouge3, rouge4, ...) works alike")
    return (f"ROUGE-{n} F-measure: word {n}-gram overlap with the reference (+ .precision, "
            ".recall, .fmeasure)")


def _make_rouge_n(n: int) -> type[RougeN]:
    name = f"rouge{n}"
    example = _ROUGE_N_EXAMPLES.get(
        n, f"a text of at least {n} tokens against itself: every {n}-gram matches, F = 1."
    )
    short = "a text without tokens" if n == 1 else f"a text of fewer than {n} tokens"
    attributes = {
        "__doc__": _ROUGE_N_CARD.format(n=n, name=name, example=example, short=short),
        "__module__": __name__,
        "base": name,
        "n": n,
        "variant": f"n{n}",
        "summary": _rouge_n_summary(n),
    }
    return type(f"Rouge{n}", (RougeN,), attributes)


Rouge1 = register(_make_rouge_n(1))
Rouge2 = register(_make_rouge_n(2))
_ROUGE_N_CLASSES: dict[int, type[Metric]] = {1: Rouge1, 2: Rouge2}


def rouge_n_class(base: str) -> type[Metric]:
    """The class of ``rougeN`` (``rouge3``, ...), one per N so equal names give equal metrics."""
    n = int(base.removeprefix("rouge"))
    if n not in _ROUGE_N_CLASSES:
        _ROUGE_N_CLASSES[n] = _make_rouge_n(n)
    return _ROUGE_N_CLASSES[n]


register_family(r"rouge[1-9][0-9]*", rouge_n_class)


@register
class RougeL(Rouge):
    """ROUGE-L: longest common subsequence of the whole answer and reference (Lin 2004).

    The texts are tokenised (``tokenizer``, optional Porter ``stem``) and compared as single
    token sequences, newlines included. Precision = LCS / answer tokens, recall = LCS /
    reference tokens, F-measure = 2PR / (P + R); headline ``rougeL`` = F-measure, with
    ``rougeL.precision``, ``rougeL.recall``, ``rougeL.fmeasure``. Range 0-1. Identical to
    rouge-score's ``rougeL``; the LCS length is computed bit-parallel (Hyyrö 2004).

    Edge cases: a text without tokens scores 0. With several references the one with the best
    F-measure counts (the first on ties). Unscored: no answer, or no reference.

    Example: reference "the cat sat on the mat", answer "on the mat the cat sat": LCS "the cat
    sat" (3 of 6), P = R = F = 0.5.

    Lin, Chin-Yew. 2004. ROUGE: A Package for Automatic Evaluation of Summaries. Text
    Summarization Branches Out (ACL workshop), 74-81.
    """

    base = "rougeL"
    variant = "lcs"
    summary = ("ROUGE-L F-measure: longest common subsequence with the reference "
               "(+ .precision, .recall, .fmeasure)")

    def counts(self, pairs: _Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return lcs_lengths(pairs)


@register
class RougeLsum(Rouge):
    """ROUGE-Lsum: summary-level LCS over sentences (Lin 2004, section 3.2), as rouge-score.

    Sentences are the non-empty lines of each text (split on newline; put one sentence per
    line). For each reference sentence, the union of its LCS with every answer sentence is
    taken (the LCS that rouge-score's table backtracking reads out); its tokens count as hits
    while both texts still have unmatched copies of them (no double counting, as ROUGE-1.5.5).
    Precision = hits / answer tokens, recall = hits / reference tokens, F-measure =
    2PR / (P + R); headline ``rougeLsum`` = F-measure, with ``.precision``, ``.recall``,
    ``.fmeasure``. Range 0-1. Identical to rouge-score's ``rougeLsum``. Without newlines it
    equals ``rougeL``.

    Edge cases: a text without tokens scores 0. With several references the one with the best
    F-measure counts (the first on ties). Unscored: no answer, or no reference.

    Example: reference "the cat sat\\non the mat", answer "on the mat\\nthe cat sat": each
    reference sentence is matched whole by one answer sentence, P = R = F = 1 (rougeL: 0.5).

    Lin, Chin-Yew. 2004. ROUGE: A Package for Automatic Evaluation of Summaries. Text
    Summarization Branches Out (ACL workshop), 74-81.
    """

    base = "rougeLsum"
    variant = "lcs-summary"
    summary_level = True
    summary = ("ROUGE-Lsum F-measure: summary-level LCS over newline-separated sentences "
               "(+ .precision, .recall, .fmeasure)")

    def counts(self, pairs: _Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return summary_lcs(pairs)
