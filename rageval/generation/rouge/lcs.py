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
