"""ROUGE-N counts: clipped n-gram matches of every pair of a batch at once (exact integers).

Every n-gram gets an exact integer id; one sort of all (pair, n-gram, side) keys then gives each
n-gram's count on each side of each pair.
"""

from __future__ import annotations

import numpy as np

from rageval.generation.rouge.pairs import _Pairs

_KEY_LIMIT = 1 << 62  # n-gram sort keys stay below this (int64)


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
