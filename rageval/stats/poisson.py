"""An online bootstrap: Poisson(1) resampling weights derived from each unit's key.

A percentile bootstrap that draws ``n`` indices per resample must hold all ``n`` values until
the end. The Poisson bootstrap gives each record, in each resample, an independent weight drawn
from Poisson(1) (the limit of a multinomial draw of ``n`` from ``n`` as ``n`` grows) and takes
the weighted mean ``sum(w * x) / sum(w)``: every resample is then a running sum, and a run
keeps ``resamples x columns`` numbers however many records it has.

The weights are not drawn from a stream: the weight of a unit in resample ``r`` is a function
of (seed, the unit's key, ``r``), computed with SplitMix64's mixing function (a counter-based
generator), and turned into Poisson(1) by its inverse distribution function at 32-bit
resolution. The same record therefore has the same weights however the run is split into
windows, batches or Ray blocks, or in whichever order the records come.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence

import numpy as np

#: Up to this many records a run's summary (and a comparison of runs) keeps every value, for
#: the exact percentile bootstrap (the textbook method, the intervals of every earlier run);
#: past them, running sums with the weights of this module.
EXACT_RECORDS = 100_000

# Cells (units x draws) weighed at once: 8 MB of weights.
_BLOCK_CELLS = 1 << 20

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Sign flips are drawn from a stream of their own: a unit's flips and its Poisson weights are
# independent of each other.
_FLIP_SALT = np.uint64(0xD1B54A32D192ED03)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)

# Poisson(1)'s distribution function at 32 bits: a uniform 32-bit draw u has weight k when
# _THRESHOLDS[k - 1] <= u < _THRESHOLDS[k]. Beyond 13 the probability is below 2**-32.
_THRESHOLDS = np.array([round(2**32 * sum(math.exp(-1) / math.factorial(j)
                                          for j in range(k + 1))) for k in range(14)],
                       dtype=np.uint64)
# The weight of each value of the draw's high 16 bits; a cell that a threshold cuts is marked
# _AMBIGUOUS and decided from all 32 bits (13 cells of 65,536: about 2 draws in 10,000).
_AMBIGUOUS = 255


def _high_half_table() -> np.ndarray:
    starts = np.arange(65536, dtype=np.uint64) << np.uint64(16)
    table = np.searchsorted(_THRESHOLDS, starts, side="right").astype(np.float64)
    cut = (_THRESHOLDS >> np.uint64(16))
    table[cut[cut < 65536].astype(np.int64)] = _AMBIGUOUS
    return table


_TABLE = _high_half_table()


def unit_keys(ids: Sequence[str]) -> np.ndarray:
    """A 64-bit key for each id (its BLAKE2b digest): what the weights are derived from."""
    raw = b"".join(hashlib.blake2b(i.encode("utf-8"), digest_size=8).digest() for i in ids)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function, in place (wrapping uint64 arithmetic)."""
    scratch = np.empty_like(z)
    for shift, factor in ((30, _MIX1), (27, _MIX2)):
        np.right_shift(z, np.uint64(shift), out=scratch)
        z ^= scratch
        z *= factor
    np.right_shift(z, np.uint64(31), out=scratch)
    z ^= scratch
    return z


def seeded_keys(keys: np.ndarray, seed: int) -> np.ndarray:
    """``keys`` mixed with the seed: the start of each unit's counter."""
    salt = _mix(np.array([seed % 2**64], dtype=np.uint64) + _GOLDEN)[0]
    return _mix(np.asarray(keys, dtype=np.uint64) ^ salt)


def poisson_weights(seeded: np.ndarray, resamples: int) -> np.ndarray:
    """The weights of the units (:func:`seeded_keys`) in resamples ``0 .. resamples - 1``:
    a float ``(units, resamples)`` array of Poisson(1) draws. Each 64-bit counter value gives
    two 32-bit draws."""
    words = (resamples + 1) // 2
    counters = np.arange(1, words + 1, dtype=np.uint64) * _GOLDEN
    mixed = _mix(np.add(seeded[:, None], counters[None, :]))
    draws = mixed.view(np.uint32).reshape(len(seeded), 2 * words)[:, :resamples]
    high = mixed.view(np.uint16).reshape(len(seeded), 4 * words)[:, 1::2][:, :resamples]
    weights = _TABLE[high]
    cut = np.flatnonzero(weights == _AMBIGUOUS)
    if len(cut):
        exact = draws.ravel()[cut].astype(np.uint64)
        weights.ravel()[cut] = np.searchsorted(_THRESHOLDS, exact, side="right")
    return weights


def sign_flips(seeded: np.ndarray, relabellings: int) -> np.ndarray:
    """The signs of the units (:func:`seeded_keys`) in the relabellings ``0 ..
    relabellings - 1`` of a paired randomization test: a float ``(units, relabellings)`` array
    of +1 and -1, each -1 (the unit's two values swapped) with probability 1/2, independent of
    the units' Poisson weights. Each 64-bit counter value gives 64 signs."""
    words = (relabellings + 63) // 64
    counters = np.arange(1, words + 1, dtype=np.uint64) * _GOLDEN
    mixed = _mix(np.add((np.asarray(seeded, dtype=np.uint64) ^ _FLIP_SALT)[:, None],
                        counters[None, :]))
    bits = np.unpackbits(mixed.view(np.uint8).reshape(len(seeded), 8 * words), axis=1)
    return 1.0 - 2.0 * bits[:, :relabellings]


def block_rows(draws: int) -> int:
    """How many units are weighed at once for ``draws`` resamples (or relabellings): 8 MB of
    weights."""
    return max(1, _BLOCK_CELLS // draws)


def drawn_sums(seeded: np.ndarray, columns: np.ndarray, draws: int,
               weights: Callable[[np.ndarray, int], np.ndarray] = poisson_weights
               ) -> np.ndarray:
    """Per draw, the units' ``columns`` summed with their weights in it (``poisson_weights``,
    or ``sign_flips``): a ``(draws, columns)`` array, the units weighed a block at a time."""
    out = np.zeros((draws, columns.shape[1]))
    step = block_rows(draws)
    for start in range(0, len(seeded), step):
        out += weights(seeded[start : start + step], draws).T @ columns[start : start + step]
    return out
