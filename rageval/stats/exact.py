"""Correctly rounded sums and means of floats, from exact integer sums.

Every float64 is an integer times ``2**-1074``: summed as Python integers, any number of values
in any order and any split give the exact sum, and one division rounds it once. Every mean a
run or a comparison reports goes through here (a run's summary held whole or kept as running
sums, a comparison held in memory or streamed from disk), so that they agree to the last bit:
on 0, 0.2 and 0.4 the mean is 0.2, where adding the floats one by one gives
0.20000000000000004.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ExactSums", "exact_group_means", "exact_mean"]


# Up to this many values are added by counting into (column, exponent) buckets, as long as
# there are at most _BUCKETS of those; past either, by sorting.
_COUNTED = 1 << 26
_BUCKETS = 1 << 20


class ExactSums:
    """Column sums of float64 rows, exact (Python integers), whatever the order or the split
    of the rows: a mean is the exact sum divided once, correctly rounded."""

    # Every float64 is an integer times 2**-1074; mantissas scaled to integers are 2**53.
    _SCALE = 1074 + 53

    def __init__(self, width: int) -> None:
        self.totals = [0] * width

    def add(self, rows: np.ndarray) -> None:
        """Add ``rows`` (``(n, width)``, finite values) to the sums."""
        if not rows.size:
            return
        columns = np.broadcast_to(np.arange(rows.shape[1]), rows.shape)
        self.add_at(rows.ravel(), columns.ravel())

    def add_at(self, values: np.ndarray, columns: np.ndarray) -> None:
        """Add each of ``values`` (finite) to the sum of its column (``columns``, aligned)."""
        if not len(values):
            return
        mantissas, exponents = np.frexp(values)
        whole = (mantissas * 2.0**53).astype(np.int64)  # exact: 53 significant bits
        columns = np.asarray(columns, dtype=np.int64)
        low_exponent = int(exponents.min())
        span = int(exponents.max()) - low_exponent + 1
        if len(values) <= _COUNTED and len(self.totals) * span <= _BUCKETS:
            self._add_counted(whole, columns * span + (exponents - low_exponent), span,
                              low_exponent)
            return
        group = (columns << 12) + (exponents + 2048)
        order = np.argsort(group, kind="stable")
        group, whole = group[order], whole[order]
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        # Split each mantissa so that sums of up to 2**36 rows stay exact in int64.
        high = np.add.reduceat(whole >> 26, starts)
        low = np.add.reduceat(whole & ((1 << 26) - 1), starts)
        for g, h, lo in zip(group[starts].tolist(), high.tolist(), low.tolist(), strict=True):
            column, exponent = g >> 12, (g & 4095) - 2048
            self.totals[column] += ((h << 26) + lo) << (exponent + self._SCALE - 53)

    def _add_counted(self, whole: np.ndarray, buckets: np.ndarray, span: int,
                     low_exponent: int) -> None:
        """Add mantissas by (column, exponent) bucket, counted with ``np.bincount``: each
        26-bit half is below 2**27, so up to 2**26 of them sum exactly in a float64."""
        size = len(self.totals) * span
        high = np.bincount(buckets, weights=whole >> 26, minlength=size)
        low = np.bincount(buckets, weights=whole & ((1 << 26) - 1), minlength=size)
        for bucket in np.flatnonzero((high != 0) | (low != 0)).tolist():
            column, exponent = divmod(bucket, span)
            total = (int(high[bucket]) << 26) + int(low[bucket])
            self.totals[column] += total << (exponent + low_exponent + self._SCALE - 53)

    def mean(self, column: int, count: int) -> float:
        """The sum of ``column`` divided by ``count``, correctly rounded."""
        return self.totals[column] / (count << self._SCALE)

    def value(self, column: int) -> float:
        """The sum of ``column``, correctly rounded."""
        return self.totals[column] / (1 << self._SCALE)


def exact_mean(values: np.ndarray) -> float:
    """The mean of ``values``, correctly rounded; NaN when there is none (and the float mean,
    infinite or NaN, when one is not finite)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if not len(values):
        return math.nan
    if not np.isfinite(values).all():
        with np.errstate(invalid="ignore", over="ignore"):
            return float(values.mean())
    sums = ExactSums(1)
    sums.add_at(values, np.zeros(len(values), dtype=np.int64))
    return sums.mean(0, len(values))


def exact_group_means(values: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
    """Per group (numbered ``0 .. count - 1``), the mean of its ``values`` (``groups``
    aligned with them), correctly rounded; NaN for a group with none (and the float mean,
    infinite or NaN, for a group with a value that is not finite)."""
    values = np.asarray(values, dtype=np.float64)
    sizes = np.bincount(groups, minlength=count)
    out = np.full(count, np.nan)
    finite = np.isfinite(values)
    if not finite.all():
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            out = np.bincount(groups, weights=values, minlength=count) / sizes
        broken = np.zeros(count, dtype=bool)
        broken[groups[~finite]] = True
        keep = ~broken[groups]
        sizes[broken] = 0
        values, groups = values[keep], groups[keep]
    alone = sizes[groups] == 1  # a group of one value: that value
    out[groups[alone]] = values[alone]
    if (sizes > 1).any():
        _several_means(values[~alone], groups[~alone], sizes, out)
    return out


# A group's values whose exponents lie within this many bits of each other (and at most
# _MOST_VALUES of them) are summed in int64 at once: each 27-bit half of a mantissa shifted
# by up to 20 bits, 2**16 of them, stays below 2**63.
_SPREAD = 20
_MOST_VALUES = 1 << 16


def _several_means(values: np.ndarray, groups: np.ndarray, sizes: np.ndarray,
                   out: np.ndarray) -> None:
    """The correctly rounded means of groups of two values or more (finite ``values``), into
    ``out``: most groups summed exactly in int64 halves, the rest as :class:`ExactSums`."""
    order = np.argsort(groups, kind="stable")
    values, groups = values[order], groups[order]
    mantissas, exponents = np.frexp(values)
    whole = (mantissas * 2.0**53).astype(np.int64)  # exact: 53 significant bits
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    nonzero = whole != 0
    lowest = np.minimum.reduceat(np.where(nonzero, exponents, 1 << 20), starts)
    lowest = np.where(lowest == 1 << 20, 0, lowest)  # a group of zeros
    shifts = np.where(nonzero, exponents - np.repeat(lowest, np.diff(np.r_[starts,
                                                                          len(values)])), 0)
    fits = ((np.maximum.reduceat(shifts, starts) <= _SPREAD)
            & (sizes[groups[starts]] <= _MOST_VALUES))
    high = np.add.reduceat((whole >> 26) << shifts, starts)
    low = np.add.reduceat((whole & ((1 << 26) - 1)) << shifts, starts)
    fitting = groups[starts][fits]
    # Each sum is ((high << 26) + low) * 2**(lowest - 53), divided once by the group's size.
    out[fitting] = [((h << 26) + lo) / (n << (53 - e)) if e <= 53
                    else ((h << 26) + lo << (e - 53)) / n
                    for h, lo, e, n in zip(high[fits].tolist(), low[fits].tolist(),
                                           lowest[fits].tolist(), sizes[fitting].tolist(),
                                           strict=True)]
    rest = ~np.repeat(fits, np.diff(np.r_[starts, len(values)]))
    if rest.any():
        wide = np.unique(groups[rest])
        numbered = np.searchsorted(wide, groups[rest])
        sums = ExactSums(len(wide))
        sums.add_at(values[rest], numbered)
        out[wide] = [sums.mean(k, size) for k, size in enumerate(sizes[wide].tolist())]
