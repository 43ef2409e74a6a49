"""ROUGE (Lin 2004): n-gram and longest-common-subsequence overlap between answer and reference.

Every value is identical, bit for bit, to Google's ``rouge-score`` 0.1.2 with its default
tokenizer: ``RougeScorer([type], use_stemmer=stem).score(target=reference, prediction=answer)``
for one reference, ``score_multi`` for several. The code is rageval's own and faster: each text
is tokenised once per batch and shared by every ROUGE metric of that batch, n-gram overlaps are
counted for the whole batch at once, and the LCS length is computed bit-parallel (Allison & Dix
1986, Hyyrö 2004) instead of with a quadratic table.

Metrics: ``rouge1``, ``rouge2``, any ``rougeN`` (``rouge3``, ``rouge4``, ...), ``rougeL``
(LCS over the whole text) and ``rougeLsum`` (summary-level LCS over newline-separated
sentences). Each writes its F-measure as the headline value plus the components
``<name>.precision``, ``<name>.recall`` and ``<name>.fmeasure``.

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

import functools
import itertools
import re
import sys
import unicodedata
from abc import abstractmethod
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import ClassVar, cast

import numpy as np

from rageval.core.registry import (
    Batch,
    Metric,
    MetricResult,
    Param,
    answer_reference_reason,
    register,
    register_family,
)
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__

__all__ = [
    "ROUGE_SCORE_SEMANTICS",
    "TOKENIZERS",
    "Rouge",
    "Rouge1",
    "Rouge2",
    "RougeL",
    "RougeLsum",
    "RougeN",
    "rouge_n_class",
    "tokenize",
]

#: The rouge-score release whose values these metrics reproduce exactly.
ROUGE_SCORE_SEMANTICS = "0.1.2"

TOKENIZERS: tuple[str, ...] = ("default", "unicode")

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



# --------------------------------------------------------------------------------------------
# Tokenisation
# --------------------------------------------------------------------------------------------

# rouge-score lowercases, turns every run of characters outside [a-z0-9] into a space and splits
# on whitespace: the tokens are exactly the runs of [a-z0-9] in the lowercased text. Internally
# they are found as bytes (non-ASCII characters become "?", a separator), which is faster.
_SEPARATE_NON_ALNUM = bytes(
    c if (0x61 <= c <= 0x7A or 0x30 <= c <= 0x39) else 0x20 for c in range(256)
)
# rouge-score keeps a (possibly stemmed) token only when it matches this, as re.match does.
_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")
_STEM_MIN_LENGTH = 4  # rouge-score stems tokens longer than 3 characters
_STEM_CACHE_LIMIT = 1 << 18
_KEY_LIMIT = 1 << 62  # n-gram sort keys stay below this (int64)

# Scripts written without spaces between words: one token per character.
_PER_CHARACTER_BLOCKS: tuple[tuple[int, int], ...] = (
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK unified ideographs extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x2FA1F),  # CJK extensions B-F, compatibility supplement
    (0x30000, 0x323AF),  # CJK extensions G-H
)

Token = str | bytes  # the default tokenizer's tokens are ASCII bytes internally

_stem_cache: dict[Token, Token] = {}


@functools.cache
def _porter() -> Callable[[str], str]:
    """NLTK's Porter stemmer in its default mode, as rouge-score builds it (loaded lazily)."""
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer().stem


def _stem_uncached(token: Token) -> Token:
    if len(token) < _STEM_MIN_LENGTH or not token.isascii():
        return token  # rouge-score leaves short tokens alone; Porter is for English (ASCII)
    word = token.decode("ascii") if isinstance(token, bytes) else token
    stemmed = _porter()(word)
    # rouge-score drops a stemmed token that is no longer letters and digits.
    if not _VALID_TOKEN.match(stemmed):
        stemmed = ""
    return stemmed.encode("ascii") if isinstance(token, bytes) else stemmed


def _stemmed(tokens: list[Token]) -> list[Token]:
    """Tokens after stemming, through a process-wide cache (stemming is a pure function)."""
    cache = _stem_cache
    out = []
    for token in tokens:
        stemmed = cache.get(token)
        if stemmed is None:
            if len(cache) >= _STEM_CACHE_LIMIT:
                cache.clear()
            stemmed = cache[token] = _stem_uncached(token)
        if stemmed:
            out.append(stemmed)
    return out


def _ranges(codepoints: Iterable[int]) -> str:
    """A regex character-class body for a sorted iterable of code points."""
    parts = []
    for _, group in itertools.groupby(enumerate(codepoints), lambda item: item[1] - item[0]):
        run = [cp for _, cp in group]
        first, last = re.escape(chr(run[0])), re.escape(chr(run[-1]))
        parts.append(first if run[0] == run[-1] else f"{first}-{last}")
    return "".join(parts)


@functools.cache
def _unicode_token_pattern() -> re.Pattern[str]:
    """Single Han/kana characters, or runs of other letters, marks and digits (built once)."""
    category = unicodedata.category
    single, run = [], []
    for cp in range(sys.maxunicode + 1):
        if category(chr(cp))[0] in "LMN":
            per_char = any(lo <= cp <= hi for lo, hi in _PER_CHARACTER_BLOCKS)
            (single if per_char else run).append(cp)
    return re.compile(f"[{_ranges(single)}]|[{_ranges(run)}]+")


def _default_tokens(text: str) -> list[bytes]:
    return text.lower().encode("ascii", "replace").translate(_SEPARATE_NON_ALNUM).split()


def _unicode_tokens(text: str) -> list[str]:
    return _unicode_token_pattern().findall(unicodedata.normalize("NFKC", text).lower())


def _tokens(text: str, tokenizer: str, stem: bool) -> list[bytes] | list[str]:
    tokens: list = _unicode_tokens(text) if tokenizer == "unicode" else _default_tokens(text)
    return _stemmed(tokens) if stem else tokens


def tokenize(text: str, tokenizer: str = "default", stem: bool = False) -> list[str]:
    """The tokens ROUGE compares: rouge-score's tokenizer by default (see the module docs).

    >>> tokenize("The cats' 2 mats!", stem=True)
    ['the', 'cat', '2', 'mat']
    """
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; known: {', '.join(TOKENIZERS)}")
    return [t.decode("ascii") if isinstance(t, bytes) else t
            for t in _tokens(text, tokenizer, stem)]


# --------------------------------------------------------------------------------------------
# The pairs of a batch, tokenised once
# --------------------------------------------------------------------------------------------


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
    key = ("rouge-pairs", tokenizer, stem, sentences)
    return batch.cached(key, lambda: _build_pairs(batch, tokenizer, stem, sentences))


# --------------------------------------------------------------------------------------------
# Kernels: per pair counts (exact integers), then rouge-score's float arithmetic
# --------------------------------------------------------------------------------------------


def _concatenated_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concat(arange(s, s + l) for s, l in zip(starts, lengths))``, vectorised."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    steps = np.ones(total, dtype=np.int64)
    nonempty = lengths > 0
    first = (ends - lengths)[nonempty]
    steps[0] = starts[nonempty][0]
    jumps = starts[nonempty][1:] - (starts[nonempty][:-1] + lengths[nonempty][:-1] - 1)
    steps[first[1:]] = jumps
    return np.cumsum(steps)


def _renumbered(grams: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ids 0..k-1 for the distinct values of ``grams``, and k."""
    _, dense = np.unique(grams, return_inverse=True)
    return dense.reshape(-1), max(int(dense.max()) + 1 if len(dense) else 0, 1)


def _gram_ids(pairs: _Pairs, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Exact ids of every n-gram of every text: (ids, start per text, count per text, bound).

    Ids are below ``bound``, which is small enough for ``(pair * bound + id) * 2 + 1`` to fit
    in int64: an n-gram is its token ids in base ``vocab``, renumbered densely when too large.
    """
    lengths, flat = pairs.lengths, pairs.flat
    counts = np.maximum(lengths - n + 1, 0)
    positions = _concatenated_ranges(np.cumsum(lengths) - lengths, counts)
    grams = flat[positions]
    vocab = max(pairs.vocab_size, 1)
    bound = vocab
    headroom = _KEY_LIMIT // (len(pairs) + 1)
    for offset in range(1, n):
        if bound * vocab >= headroom:
            grams, bound = _renumbered(grams)
        following = flat[positions + offset]
        if bound * vocab < headroom:
            grams = grams * vocab + following
            bound *= vocab
        else:  # only for gigantic batches: pair up ids without arithmetic
            grams, bound = _renumbered_rows(np.stack([grams, following], axis=1))
    if bound >= headroom:
        grams, bound = _renumbered(grams)
    return grams, np.cumsum(counts) - counts, counts, bound


def _renumbered_rows(rows: np.ndarray) -> tuple[np.ndarray, int]:
    _, dense = np.unique(rows, axis=0, return_inverse=True)
    return dense.reshape(-1), max(int(dense.max()) + 1 if len(dense) else 0, 1)


def _pair_keys(
    grams: np.ndarray, starts: np.ndarray, counts: np.ndarray, bound: int, side: np.ndarray
) -> np.ndarray:
    """``pair * bound + gram`` for every n-gram occurrence on one side of every pair."""
    per_pair = counts[side]
    pair = np.repeat(np.arange(len(side), dtype=np.int64), per_pair)
    return pair * bound + grams[_concatenated_ranges(starts[side], per_pair)]


def ngram_overlap(pairs: _Pairs, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair: clipped n-gram matches, reference n-grams, answer n-grams (integers).

    One sort of every (pair, n-gram, side) occurrence: each run of equal keys is the count of
    one n-gram on one side of one pair, and a reference run followed by the answer run of the
    same n-gram contributes the smaller of the two counts.
    """
    grams, starts, counts, bound = _gram_ids(pairs, n)
    keys = np.concatenate([
        _pair_keys(grams, starts, counts, bound, pairs.target) * 2,
        _pair_keys(grams, starts, counts, bound, pairs.prediction) * 2 + 1,
    ])
    if 2 * bound * (len(pairs) + 1) <= 1 << 32:
        keys = keys.astype(np.uint32)  # sorts faster; the values are unchanged
    keys.sort()
    matches = np.zeros(len(pairs), dtype=np.int64)
    if len(keys):
        run_start = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
        run_length = np.diff(np.append(run_start, len(keys)))
        run_key = keys[run_start].astype(np.int64)
        both = (run_key[1:] == run_key[:-1] + 1) & (run_key[:-1] % 2 == 0)
        clipped = np.minimum(run_length[:-1][both], run_length[1:][both])
        pair = run_key[:-1][both] // (2 * bound)
        matches = np.bincount(pair, weights=clipped, minlength=len(pairs)).astype(np.int64)
    return matches, counts[pairs.target], counts[pairs.prediction]


def _position_masks(tokens: Sequence[int]) -> dict[int, int]:
    """For each token, the bit mask of its positions in the sequence."""
    masks: dict[int, int] = {}
    get = masks.get
    for token, bit in zip(tokens, _bits(len(tokens)), strict=False):
        masks[token] = get(token, 0) | bit
    return masks


_BITS: list[int] = [1 << i for i in range(256)]


def _bits(n: int) -> list[int]:
    """``[1 << i for i in range(n)]``, at least; grown on demand."""
    global _BITS
    if n > len(_BITS):
        _BITS = [1 << i for i in range(max(n, 2 * len(_BITS)))]
    return _BITS


def _lcs_length(tokens: Sequence[int], masks: dict[int, int], n: int) -> int:
    """LCS length of ``tokens`` and the length-``n`` sequence described by ``masks``.

    Hyyrö's bit-vector recurrence ``v = (v + (v & m)) | (v & ~m)`` over the tokens that occur
    in both: ``v`` has a zero bit at each position where the DP row steps up, so the LCS
    length is the number of zero bits among the low ``n``.
    """
    full = (1 << n) - 1
    v = full
    for match in filter(None, map(masks.get, tokens)):
        v = (v + (v & match)) | (v & ~match)
    return n - (v & full).bit_count()


def lcs_lengths(pairs: _Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair: LCS length, reference length, answer length (integers)."""
    texts = cast(list[list[int]], pairs.texts)
    lcs: list[int] = []
    last, masks = -1, {}
    for t, a in zip(pairs.target.tolist(), pairs.prediction.tolist(), strict=True):
        answer, reference = texts[a], texts[t]
        if a != last:  # the pairs of one record share its answer
            last, masks = a, _position_masks(answer)
        lcs.append(_lcs_length(reference, masks, len(answer)) if reference and answer else 0)
    lengths = pairs.lengths
    return np.array(lcs, dtype=np.int64), lengths[pairs.target], lengths[pairs.prediction]


def lcs_indices(ref: Sequence[int], can: Sequence[int], masks: dict[int, int]) -> list[int]:
    """Indices into ``ref`` of the one LCS that rouge-score's table backtracking reads out.

    ``masks`` are ``can``'s position masks. The DP rows are kept as bit vectors (as in
    :func:`_lcs_length`): cell (i, j) = j - popcount(row_i & (2^j - 1)), so bit j-1 of row i is
    set exactly when cell (i, j-1) equals cell (i, j). The walk tracks x = cell (i, j) and
    takes rouge-score's steps: diagonal on equal tokens, left when cell (i, j-1) >
    cell (i-1, j) (that is, cell (i, j-1) = x and cell (i-1, j) = x - 1), else up.
    """
    if masks.keys().isdisjoint(ref):
        return []
    n = len(can)
    full = (1 << n) - 1
    rows = [full]
    v = full
    get = masks.get
    for token in ref:
        match = get(token)
        if match:
            v = ((v + (v & match)) | (v & ~match)) & full
        rows.append(v)
    x = n - v.bit_count()
    i, j = len(ref), n
    out: list[int] = []
    while x:
        if ref[i - 1] == can[j - 1]:
            i -= 1
            j -= 1
            x -= 1
            out.append(i)
        elif rows[i] >> (j - 1) & 1 and j - (rows[i - 1] & ((1 << j) - 1)).bit_count() < x:
            j -= 1
        else:
            i -= 1
    out.reverse()
    return out


def summary_lcs_hits(ref_sents: list[list[int]], can_sents: list[list[int]]) -> int:
    """Summary-level LCS hits (Lin 2004, 3.2), without double counting, as ROUGE-1.5.5.

    For each reference sentence, the union of its LCS with every answer sentence; a token of
    the union is a hit while both texts still have an unmatched copy of it.
    """
    ref_counts = Counter(itertools.chain.from_iterable(ref_sents))
    can_counts = Counter(itertools.chain.from_iterable(can_sents))
    can_masks = [_position_masks(can) for can in can_sents]
    hits = 0
    for ref in ref_sents:
        union: set[int] = set()
        for can, masks in zip(can_sents, can_masks, strict=True):
            union.update(lcs_indices(ref, can, masks))
        for token in (ref[i] for i in sorted(union)):
            if can_counts[token] > 0 and ref_counts[token] > 0:
                hits += 1
                can_counts[token] -= 1
                ref_counts[token] -= 1
    return hits


def summary_lcs(pairs: _Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair: summary-level LCS hits, reference tokens, answer tokens (integers).

    A side without tokens has no hits (rouge-score scores it 0).
    """
    texts = cast(list[list[list[int]]], pairs.texts)
    lengths = pairs.lengths
    hits = [
        summary_lcs_hits(texts[t], texts[a]) if lengths[t] and lengths[a] else 0
        for t, a in zip(pairs.target.tolist(), pairs.prediction.tolist(), strict=True)
    ]
    return np.array(hits, dtype=np.int64), lengths[pairs.target], lengths[pairs.prediction]


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
    if len(np.unique(record)) == len(record):  # one reference each: nothing to choose
        best[record] = np.arange(len(record))
        return best
    best_f = [-1.0] * n_records
    for p, (r, f) in enumerate(zip(record.tolist(), fmeasure.tolist(), strict=True)):
        if f > best_f[r]:
            best_f[r] = f
            best[r] = p
    return best


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


class Rouge(Metric):
    """Base of the ROUGE metrics: pairs, best reference, components, signature."""

    family = "lexical"
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
