"""What the kernels share: per-query row segments, and trec_eval-exact arithmetic.

A :class:`~rageval.retrieval.ranking.Ranking` stores its rows query after query; one query's rows
are a *segment*, delimited by offsets (CSR layout). Kernels work on subsets of those rows
(:class:`_Sub`: e.g. the relevant or the judged ones, cached on the ranking), count within the
top k, and accumulate sums and scans strictly in rank order (:func:`_seq_scan`,
:func:`_seq_sum`), so that results match trec_eval's running sums bit for bit. Logarithms and
powers come from tables computed as trec_eval computes them (libm ``log2``, repeated
multiplication).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rageval.retrieval.ranking import Ranking
from rageval.retrieval.ranking.arrays import offsets_from_counts

# CSR offsets of segments of the given sizes (one definition, the ranking's).
_offsets = offsets_from_counts


_LOG2: list[np.ndarray] = [np.array([-np.inf])]


def _log2_table(n: int) -> np.ndarray:
    """``t[i] == log2(i)`` for ``0 < i <= n`` from the C library's log2 (as trec_eval uses).

    numpy's SIMD log2 may differ from libm's in the last bit, which can flip a 4th decimal.
    """
    table = _LOG2[0]
    if table.size <= n:
        size = max(n + 1, 2 * table.size, 1024)
        extra = np.fromiter((math.log2(i) for i in range(table.size, size)), np.float64)
        table = np.concatenate((table, extra))
        _LOG2[0] = table
    return table


def _log2_of(values: np.ndarray) -> np.ndarray:
    """libm log2 of arbitrary positive doubles (one Python call per distinct value)."""
    uniq, inv = np.unique(values, return_inverse=True)
    logs = np.fromiter((math.log2(v) for v in uniq.tolist()), np.float64, uniq.size)
    return logs[inv]


def _power_table(p: float, n: int) -> np.ndarray:
    """``t[i] == p**i`` computed by repeated multiplication (``cur_p *= p``), as trec_eval."""
    steps = np.full(n + 1, p, dtype=np.float64)
    steps[0] = 1.0
    return np.multiply.accumulate(steps)


def _length_buckets(counts: np.ndarray, min_len: int = 1) -> list[tuple[np.ndarray, int]]:
    """Segments with >= ``min_len`` elements grouped so that padding wastes <= half the space."""
    segs = np.flatnonzero(counts >= min_len)
    if segs.size == 0:
        return []
    lens = counts[segs]
    if lens.min() * 2 >= lens.max():
        return [(segs, int(lens.max()))]
    exp = np.frexp(lens.astype(np.float64))[1]
    return [(segs[exp == e], int(lens[exp == e].max())) for e in np.unique(exp)]


def _seq_scan(
    values: np.ndarray,
    offsets: np.ndarray,
    op: np.ufunc,
    identity: float,
    *,
    reverse: bool = False,
) -> np.ndarray:
    """Inclusive scan of ``op`` within each segment, evaluated strictly left to right.

    ``np.add.reduceat``/``np.sum`` sum pairwise, which can differ from trec_eval's running sums
    in the last bit; ``ufunc.accumulate`` along the rows of a padded 2-D block is sequential.
    Segments are bucketed by length so padding costs at most 2x.
    """
    n = values.size
    if reverse:
        back = _seq_scan(values[::-1], n - offsets[::-1], op, identity)
        return back[::-1]
    out = np.empty_like(values)
    if n == 0:
        return out
    counts = np.diff(offsets)
    nseg = counts.size
    width = int(counts.max())
    if width * nseg == n and np.all(counts == width):
        block = values.reshape(nseg, width).copy()
        op.accumulate(block, axis=1, out=block)
        return block.reshape(-1)
    for segs, w in _length_buckets(counts):
        cols = np.arange(w)
        per = max(1, (1 << 21) // w)
        for i in range(0, segs.size, per):
            chunk = segs[i : i + per]
            valid = cols[None, :] < counts[chunk][:, None]
            idx = (offsets[chunk][:, None] + cols[None, :])[valid]
            block = np.full((chunk.size, w), identity, dtype=values.dtype)
            block[valid] = values[idx]
            op.accumulate(block, axis=1, out=block)
            out[idx] = block[valid]
    return out


def _seq_sum(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per-segment sums accumulated sequentially (0.0 for an empty segment)."""
    counts = np.diff(offsets)
    sums = np.zeros(counts.size, dtype=np.float64)
    if values.size == 0:
        return sums
    scan = _seq_scan(values.astype(np.float64, copy=False), offsets, np.add, 0.0)
    nz = counts > 0
    sums[nz] = scan[offsets[1:][nz] - 1]
    return sums


def _last_or_zero(scan: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Last value of each segment of a scan; 0.0 for an empty segment."""
    counts = np.diff(offsets)
    out = np.zeros(counts.size, dtype=np.float64)
    nz = counts > 0
    out[nz] = scan[offsets[1:][nz] - 1]
    return out


@dataclass(frozen=True)
class _Sub:
    """A subset of the retrieved rows, in rank order, with its own segment offsets."""

    rows: np.ndarray  # indices into the ranking's rows
    seg: np.ndarray  # query of each row
    pos: np.ndarray  # 0-based rank of each row within its query
    offsets: np.ndarray  # segment offsets of the subset
    counts: np.ndarray  # rows per query
    nth: np.ndarray  # 1-based index of each row within its query's subset


def _subset(r: Ranking, mask: np.ndarray) -> _Sub:
    return _subset_rows(r, np.flatnonzero(mask))


def _subset_rows(r: Ranking, rows: np.ndarray) -> _Sub:
    """Sub-ranking of the given rows (ascending); no per-row array of the full ranking."""
    seg = np.searchsorted(r.offsets, rows, side="right") - 1
    pos = rows - r.offsets[seg]
    counts = np.bincount(seg, minlength=r.num_queries).astype(np.int64)
    offsets = _offsets(counts)
    nth = np.arange(rows.size, dtype=np.int64) - offsets[seg] + 1
    return _Sub(rows, seg, pos, offsets, counts, nth)


def _relevant(r: Ranking, rel_level: int) -> _Sub:
    """Retrieved rows with relevance value >= rel_level (cached per level)."""
    key = ("relsub", rel_level)
    if key not in r._cache:
        r._cache[key] = _subset(r, r.te_rel() >= rel_level)
    sub: _Sub = r._cache[key]
    return sub


def _uncounted_relevant(r: Ranking, rel_level: int) -> np.ndarray:
    """Per query, the retrieved rows that pass ``>= rel_level`` but that trec_eval's num_rel_ret
    leaves out: with ``-l`` below 0, the unjudged (-1) and, below -1, the judged-negative (-2)
    documents. trec_eval's backward scans start from num_rel_ret yet step down on every such row,
    so these rows shift their counts (0 for any ``rel_level >= 0``)."""
    if rel_level >= 0:
        return np.zeros(r.num_queries, dtype=np.int64)
    return _relevant(r, rel_level).counts - _relevant(r, 0).counts


def _judged(r: Ranking) -> _Sub:
    """Retrieved rows judged with a grade >= 0."""
    if "judgedsub" not in r._cache:
        r._cache["judgedsub"] = _subset(r, r.te_rel() >= 0)
    sub: _Sub = r._cache["judgedsub"]
    return sub


def _count_top(r: Ranking, sub: _Sub, k: int | np.ndarray) -> np.ndarray:
    """Per query, the number of subset rows ranked within the top ``k`` (k may vary by query)."""
    kk = k if np.isscalar(k) else np.asarray(k)[sub.seg]
    hit = sub.pos < kk
    return np.bincount(sub.seg[hit], minlength=r.num_queries).astype(np.int64)


def _exclusive_count(flags: np.ndarray, sub: _Sub) -> np.ndarray:
    """For each subset row, how many earlier rows of the same query have ``flags`` set."""
    inclusive = np.cumsum(flags, dtype=np.int64)
    before = np.concatenate(([0], inclusive))[sub.offsets[:-1]]
    return inclusive - before[sub.seg] - flags


# Stride that makes (query, rank) one sortable key in _prefix_at.
_BIG = np.int64(1) << np.int64(40)


def _prefix_at(sub: _Sub, scan: np.ndarray, seg: np.ndarray, upto: np.ndarray) -> np.ndarray:
    """Value of a per-row running sum over the subset rows ranked before ``upto`` (0 if none)."""
    starts = sub.offsets[seg]
    ends = sub.offsets[seg + 1]
    # number of subset rows of the query with pos < upto
    idx = np.searchsorted(sub.pos + sub.seg.astype(np.int64) * _BIG, seg * _BIG + upto)
    idx = np.clip(idx, starts, ends)
    out = np.zeros(seg.size, dtype=np.float64)
    has = idx > starts
    out[has] = scan[idx[has] - 1]
    return out


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den where den != 0, else 0 (trec_eval leaves such values at 0)."""
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=np.asarray(den) != 0)
    return out


def _num_rel_f(r: Ranking, rel_level: int) -> np.ndarray:
    return r.num_rel(rel_level).astype(np.float64)
