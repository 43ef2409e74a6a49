"""Kernels built on a model of a user reading down the ranking.

RBP: the user goes on to the next document with probability p (and rbp_resid, how much RBP the
unjudged documents leave open); ERR: the user stops at the first document that satisfies them,
with a probability given by its grade (the cascade model).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from rageval.retrieval.kernels.gains import _gain_values
from rageval.retrieval.kernels.segments import (
    _power_table,
    _seq_scan,
    _seq_sum,
    _subset,
    _subset_rows,
)
from rageval.retrieval.ranking import Ranking


def rbp(r: Ranking, p: float = 0.9, gains: Mapping[int, float] | None = None) -> np.ndarray:
    """RBP (Moffat & Zobel 2008): (1 - p) * sum over ranks i >= 1 of gain_i * p**(i-1).

    Gains are trec_eval's (grade, or ``gains`` overrides), rescaled per query to [0, 1] by
    (g - min) / (max - min) over the query's gain levels when they leave that range.
    """
    te = r.te_rel()
    # Only values that are gain levels can have a gain; any other value (e.g. not pooled)
    # keeps gain 0 even after rescaling (trec_eval's get_gain).
    levels_mask = te >= 0
    for level in gains or {}:
        levels_mask |= te == int(level)
    sub = _subset(r, levels_mask)
    rg = _gain_values(te[sub.rows], gains)
    lo, hi = _query_gain_levels(r, gains)
    rescale = ((lo < 0) | (hi > 1))[sub.seg]
    if rescale.any():
        seg = sub.seg[rescale]
        with np.errstate(divide="ignore", invalid="ignore"):
            rg[rescale] = (rg[rescale] - lo[seg]) / (hi - lo)[seg]
    nz = rg != 0
    sub = _subset_rows(r, sub.rows[nz])
    table = _power_table(p, int(sub.pos.max()) + 1 if sub.pos.size else 1)
    sums = _seq_sum(rg[nz] * table[sub.pos], sub.offsets)
    return (1.0 - p) * sums


def _query_gain_levels(
    r: Ranking, gains: Mapping[int, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per query, min and max gain over trec_eval's gain levels (0..max grade, plus overrides)."""
    nq = r.num_queries
    g = r.judged_grades
    seg = r.judged_segment_ids()
    top = np.full(nq, -1, dtype=np.int64)
    keep = g >= 0
    np.maximum.at(top, seg[keep], g[keep])
    lo = np.zeros(nq, dtype=np.float64)
    hi = np.zeros(nq, dtype=np.float64)
    over = {int(k): float(v) for k, v in (gains or {}).items()}
    # Default levels 0..top have gain = level, except overridden ones.
    has = top >= 0
    hi[has] = top[has].astype(np.float64)
    lo[:] = 0.0
    if over:
        for q in range(nq):
            vals = [over.get(level, float(level)) for level in range(int(top[q]) + 1)]
            vals += list(over.values())
            lo[q] = min(vals)
            hi[q] = max(vals)
    return lo, hi


def rbp_residual(r: Ranking, p: float = 0.9) -> np.ndarray:
    """rbp_resid: the most RBP could grow if every unjudged retrieved document were fully
    relevant: p**num_ret + (1 - p) * sum over unjudged ranks i of p**(i-1); 0 when every
    retrieved document is judged."""
    unj = r.te_rel() < 0
    nret = r.num_ret()
    table = _power_table(p, max(int(nret.max()) if nret.size else 0, 1))
    # Unjudged documents are usually most of the run: work on the full layout.
    values = np.where(unj, table[r.positions()], 0.0)
    sums = _seq_sum(values, r.offsets)
    counts = np.concatenate(([0], np.cumsum(unj, dtype=np.int64)))
    has = (counts[r.offsets[1:]] - counts[r.offsets[:-1]]) > 0
    out = np.zeros(r.num_queries, dtype=np.float64)
    out[has] = table[nret[has]] + (1 - p) * sums[has]
    return out


def err_at(r: Ranking, k: int | None, gmax: int) -> np.ndarray:
    """ERR@k, Expected Reciprocal Rank (Chapelle et al. 2009).

    R_i = (2**g_i - 1) / 2**gmax with g_i the grade at rank i (clipped below at 0, unjudged =
    0); ERR = sum_{i<=k} (1/i) * R_i * prod_{j<i} (1 - R_j). Raises ValueError when a grade
    exceeds ``gmax``. ``k=None``: all ranks.
    """
    if r.judged_grades.size and int(r.judged_grades.max()) > gmax:
        raise ValueError(f"grade {int(r.judged_grades.max())} exceeds gmax={gmax}")
    te = r.te_rel()
    if k is None:
        sub = _subset_rows(r, np.arange(te.size))
    else:
        counts = np.minimum(r.num_ret(), k)
        starts = r.offsets[:-1]
        rows = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - starts, counts)
        sub = _subset_rows(r, rows)
    grades = np.maximum(te[sub.rows], 0)
    stop = (np.ldexp(1.0, grades) - 1.0) / math.ldexp(1.0, gmax)
    keep_going = _seq_scan(1.0 - stop, sub.offsets, np.multiply, 1.0)
    before = np.ones(stop.size, dtype=np.float64)  # prod over earlier ranks
    if stop.size:
        before[1:] = keep_going[:-1]
        before[sub.offsets[:-1][sub.counts > 0]] = 1.0
    return _seq_sum(stop * before / (sub.pos + 1.0), sub.offsets)
