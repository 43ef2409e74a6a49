"""ROUGE-L and ROUGE-Lsum counts: longest common subsequences, bit-parallel (Allison & Dix
1986, Hyyrö 2004) instead of rouge-score's quadratic table, with the same results (exact
integers), including the one LCS that rouge-score's backtracking reads out for ROUGE-Lsum."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import cast

import numpy as np

from rageval.generation.rouge.pairs import _Pairs


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
    """Per pair: LCS length, reference length, answer length (integers).

    Pairs whose answer fits in :data:`_MAX_WORDS` machine words and whose reference is at most
    :data:`_MAX_STEPS` tokens run the recurrence for many pairs at once (:func:`_lcs_words`);
    the rest, one pair at a time on Python integers of any width. Both give the same integers.
    """
    lengths = pairs.lengths
    ref_len, ans_len = lengths[pairs.target], lengths[pairs.prediction]
    lcs = np.zeros(len(pairs), dtype=np.int64)
    words = np.maximum(1, -(-ans_len // _WORD))
    wide = (words > _MAX_WORDS) | (ref_len > _MAX_STEPS)
    if not wide.all():
        starts = np.cumsum(lengths) - lengths
        dtype = np.int32 if pairs.vocab_size < np.iinfo(np.int32).max else np.int64
        flat = pairs.flat.astype(dtype)
        ref_start, ans_start = starts[pairs.target], starts[pairs.prediction]
        for w in np.unique(words[~wide]).tolist():
            # Pairs of one width share a word count; sorted by reference length, the pairs of
            # a chunk take about as many steps each.
            group = np.flatnonzero((words == w) & ~wide)
            group = group[np.argsort(ref_len[group], kind="stable")]
            per_chunk = max(1, _CHUNK_CELLS // (w * _WORD * max(1, int(ref_len[group].max()))))
            for first in range(0, len(group), per_chunk):
                at = group[first : first + per_chunk]
                lcs[at] = _lcs_words(flat, ref_start[at], ref_len[at], ans_start[at],
                                     ans_len[at], w)
    if wide.any():
        texts = cast(list[list[int]], pairs.texts)
        target, prediction = pairs.target, pairs.prediction
        for i in np.flatnonzero(wide).tolist():
            answer, reference = texts[prediction[i]], texts[target[i]]
            if reference and answer:
                lcs[i] = _lcs_length(reference, _position_masks(answer), len(answer))
    return lcs, ref_len, ans_len


# The batched recurrence: answers of up to _MAX_WORDS 64-bit words, references of up to
# _MAX_STEPS tokens, and at most _CHUNK_CELLS token comparisons held at once (4 MiB).
_WORD = 64
_MAX_WORDS = 4
_MAX_STEPS = 1024
_CHUNK_CELLS = 1 << 22
_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _padded(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int,
            pad: int) -> np.ndarray:
    """Each text's tokens in a row of ``width``, ``pad`` after its end (``pad`` is no token)."""
    cols = np.arange(width)
    if not len(flat):
        return np.full((len(starts), width), pad, dtype=flat.dtype)
    tokens = flat[np.minimum(starts[:, None] + cols, len(flat) - 1)]
    return np.where(cols < lengths[:, None], tokens, flat.dtype.type(pad))


def _lcs_words(flat: np.ndarray, ref_start: np.ndarray, ref_len: np.ndarray,
               ans_start: np.ndarray, ans_len: np.ndarray, words: int) -> np.ndarray:
    """LCS lengths of many pairs at once: :func:`_lcs_length`'s recurrence on ``words``
    little-endian 64-bit words per pair, the carry of each word's addition passed to the next.

    Bits above the answer's length may differ from those of a Python integer (the carry out of
    the top word is dropped), but a carry only moves up, so the low bits counted are the same.
    """
    steps = int(ref_len.max(initial=0))
    answers = _padded(flat, ans_start, ans_len, words * _WORD, -1)
    references = _padded(flat, ref_start, ref_len, steps, -2)
    # Bit i of a pair's mask at step j: answer token i equals reference token j.
    masks = np.packbits(references[:, :, None] == answers[:, None, :], axis=2,
                        bitorder="little").view("<u8")
    shift = np.clip(ans_len[:, None] - _WORD * np.arange(words), 0, _WORD).astype(np.uint64)
    full = np.where(shift >= _WORD, _ONES,
                    (np.uint64(1) << np.minimum(shift, np.uint64(_WORD - 1))) - np.uint64(1))
    v = full.copy()
    if words == 1:
        row = v[:, 0]
        for j in range(steps):
            match = masks[:, j, 0]
            row = (row + (row & match)) | (row & ~match)
        v[:, 0] = row
    else:
        for j in range(steps):
            match = masks[:, j]
            kept = v & ~match
            carry = np.zeros(len(v), dtype=np.uint64)
            for w in range(words):
                low = v[:, w]
                added = low + (low & match[:, w])
                total = added + carry
                carry = ((added < low) | (total < added)).astype(np.uint64)
                v[:, w] = total | kept[:, w]
    return ans_len - np.bitwise_count(v & full).sum(axis=1, dtype=np.int64)


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
