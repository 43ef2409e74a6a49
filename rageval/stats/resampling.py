"""Statistics with explicit, seeded random generators (never a global or environment seed)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rageval.core.errors import check_int

# Resampling matrices are built in blocks so that 100k records x 10k resamples stays in memory.
_BLOCK_CELLS = 4_000_000
# Resampled values are gathered a few rows at a time: a gather of about 2 MB stays in the
# processor's cache while it is summed: about 40% less time than one gathered whole.
_GATHER_CELLS = 1 << 18
# Below this many resampled values in all, a second thread costs more than it saves.
_THREADED_CELLS = 20_000_000


def _index_blocks(n: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The bootstrap draws of ``n`` values: blocks of rows of ``n`` indices each, from a
    generator seeded with ``seed`` (the same draws for every caller with the same seed)."""
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_CELLS // n)
    for start in range(0, resamples, block):
        yield rng.integers(0, n, size=(min(block, resamples - start), n))


def _check_bootstrap(resamples: int, level: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _percentiles(stats: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)


def percentile_interval(stats: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    """The percentile interval of resampled statistics, NaN (a resample in which the
    statistic is undefined) left out; None when none is defined."""
    _check_bootstrap(1, level)
    defined = stats[~np.isnan(stats)]
    return _percentiles(defined, level) if len(defined) else None


def bootstrap_ci(
    values: np.ndarray,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    statistic: Callable[[np.ndarray], float] | None = None,
) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean (or of ``statistic(indices)``).

    ``values`` holds the scored values only (no NaN). With ``statistic`` given, it is called with
    an array of resampled indices into ``values`` and returns the statistic of that resample;
    corpus-level metrics (corpus BLEU) use it to recompute from sufficient statistics.
    Returns None when there is nothing to resample; a single value gives ``(v, v)``.
    """
    n = len(values)
    if n == 0:
        return None
    if statistic is None:
        return bootstrap_mean_cis([values], resamples=resamples, seed=seed, level=level)[0]
    _check_bootstrap(resamples, level)
    stats = np.empty(resamples, dtype=np.float64)
    start = 0
    for idx in _index_blocks(n, resamples, seed):
        stats[start : start + len(idx)] = [statistic(row) for row in idx]
        start += len(idx)
    return _percentiles(stats, level)


def two_level_bootstrap_ci(samples: np.ndarray, *, resamples: int = 1000, seed: int = 0,
                           level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean of per-record means, resampling the records (the
    draws :func:`bootstrap_ci` makes with the same seed) and then, within each drawn record,
    its samples with replacement: an interval that holds the noise of a judge asked several
    times beside the sampling of records. ``samples`` has one row per record, its samples
    first and NaN after; a record of one sample keeps it, so with no record of two or more
    the interval is :func:`bootstrap_ci`'s of the record means.
    """
    n = len(samples)
    if n == 0:
        return None
    _check_bootstrap(resamples, level)
    width = samples.shape[1]
    counts = (~np.isnan(samples)).sum(axis=1)
    if (counts == 0).any() or np.isnan(samples[np.arange(width) < counts[:, None]]).any():
        raise ValueError("each record needs at least one sample, its samples first")
    filled = np.where(np.isnan(samples), 0.0, samples)
    inner = np.random.default_rng([seed, 1])  # the draws within records: a stream of its own
    stats = np.empty(resamples, dtype=np.float64)
    start = 0
    for block in _index_blocks(n, resamples, seed):
        for rows in np.array_split(block, -(-block.size * width // _BLOCK_CELLS)):
            k = counts[rows]
            picks = (inner.random((*rows.shape, width)) * k[..., None]).astype(np.int64)
            drawn = np.take_along_axis(filled[rows], picks, axis=2)
            kept = np.arange(width) < k[..., None]
            stats[start:start + len(rows)] = ((drawn * kept).sum(axis=2) / k).mean(axis=1)
            start += len(rows)
    return _percentiles(stats, level)


def bootstrap_mean_cis(
    arrays: Sequence[np.ndarray], *, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> list[tuple[float, float] | None]:
    """``[bootstrap_ci(a, ...) for a in arrays]``, exactly, in less time: arrays of one length
    share their draws (the same seed draws the same indices), and equal arrays (a metric's
    headline and the component it repeats) are resampled once."""
    if any(len(values) for values in arrays):
        _check_bootstrap(resamples, level)
    out: list[tuple[float, float] | None] = [None] * len(arrays)
    by_length: dict[int, dict[tuple[str, bytes], list[int]]] = {}
    for i, values in enumerate(arrays):
        if len(values):
            key = (values.dtype.str, np.ascontiguousarray(values).tobytes())
            by_length.setdefault(len(values), {}).setdefault(key, []).append(i)
    for n, groups in by_length.items():
        distinct = [arrays[positions[0]] for positions in groups.values()]
        stats = _resampled_means(distinct, n, resamples, seed)
        for row, positions in enumerate(groups.values()):
            ci = _percentiles(stats[row], level)
            for i in positions:
                out[i] = ci
    return out


def _resampled_means(arrays: list[np.ndarray], n: int, resamples: int,
                     seed: int) -> np.ndarray:
    """The mean of each array (all of length ``n``) in each resample: ``(arrays, resamples)``.

    The arrays are shared out between two threads when there is enough work (numpy's gathers
    and sums run without the GIL); each resample's mean is computed alone, whatever the split,
    so the values are those of one ``array[idx].mean(axis=1)``."""
    stats = np.empty((len(arrays), resamples), dtype=np.float64)
    rows = max(1, _GATHER_CELLS // n)

    def fill(which: range, idx: np.ndarray, start: int) -> None:
        for first in range(0, len(idx), rows):
            part = idx[first : first + rows]
            at = slice(start + first, start + first + len(part))
            for k in which:
                stats[k, at] = arrays[k][part].mean(axis=1)

    threads = min(2, len(arrays), _usable_cpus())
    if len(arrays) * n * resamples < _THREADED_CELLS:
        threads = 1
    shares = [range(t, len(arrays), threads) for t in range(threads)]
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(ThreadPoolExecutor(threads)) if threads > 1 else None
        start = 0
        for idx in _index_blocks(n, resamples, seed):
            if pool is None:
                fill(shares[0], idx, start)
            else:
                for done in [pool.submit(fill, share, idx, start) for share in shares]:
                    done.result()
            start += len(idx)
    return stats


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system reports one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every system
        return os.cpu_count() or 1


# ---- paired comparisons of two systems on the same records ----------------------------------
#
# Both procedures below take the statistic as a function of a block of resamples, so that one
# set of draws serves every metric that has the same records (resampled jointly, as a paired
# design requires) and corpus-level metrics recompute their figure from summed statistics.

# Ties between a resampled and the observed statistic are decided with this relative tolerance:
# sums of the same numbers in another order may differ in the last bits (scipy does the same).
_TIE_RTOL = 1e-9


def bootstrap_weights(n: int, *, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Bootstrap resamples of ``n`` records, in blocks, as multiplicity matrices.

    Each block is a float array of shape ``(k, n)``: entry ``[r, i]`` is how often record ``i``
    is drawn in resample ``r`` (rows sum to ``n``). A statistic that is linear in the records
    (a sum, the sufficient statistics of corpus BLEU) is then one matrix product per block.
    The draws are exactly those of :func:`bootstrap_ci` with the same seed.
    """
    _check_count("resamples", resamples)
    if n < 1:
        raise ValueError("the bootstrap needs at least one record")
    for idx in _index_blocks(n, resamples, seed):
        size = len(idx)
        idx += np.arange(size)[:, None] * n  # one bincount for the whole block
        counts = np.bincount(idx.ravel(), minlength=size * n)
        yield counts.reshape(size, n).astype(np.float64)


def paired_bootstrap(
    statistic: Callable[[np.ndarray], np.ndarray],
    n: int,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> np.ndarray:
    """Percentile bootstrap CIs of paired statistics, resampling the ``n`` records jointly.

    ``statistic`` receives a block of multiplicities from :func:`bootstrap_weights` (``(k, n)``)
    and returns ``(k, m)`` values, one column per statistic (a delta between two systems).
    Because a record is drawn with both of its values, the interval reflects the pairing.
    A NaN value marks a resample in which that statistic is undefined (none of the records it
    is scored on was drawn); such resamples are left out of that column's quantiles.
    Returns an ``(m, 2)`` array of ``[lo, hi]`` (NaN for a column with no defined resample).
    """
    _check_level(level)
    blocks = [np.asarray(statistic(w), dtype=np.float64) for w in
              bootstrap_weights(n, resamples=resamples, seed=seed)]
    stats = np.concatenate([b.reshape(len(b), -1) for b in blocks])
    alpha = (1 - level) / 2
    out = np.full((stats.shape[1], 2), np.nan)
    for j, column in enumerate(stats.T):
        defined = column[~np.isnan(column)]
        if len(defined):
            out[j] = np.quantile(defined, [alpha, 1 - alpha])
    return out


def paired_bootstrap_ci(
    differences: np.ndarray, *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> np.ndarray:
    """Percentile CI of the mean of paired differences (``system - baseline`` per record).

    ``differences`` is ``(n,)`` or ``(n, m)`` (several metrics on the same records, resampled
    jointly). Returns ``(2,)`` or ``(m, 2)``. With one column this is :func:`bootstrap_ci` of the
    differences (same draws), computed by matrix products instead of gathers.
    """
    d = np.asarray(differences, dtype=np.float64)
    matrix = d.reshape(len(d), -1)
    ci = paired_bootstrap(lambda w: w @ matrix / len(matrix), len(matrix),
                          resamples=resamples, seed=seed, level=level)
    return ci[0] if d.ndim == 1 else ci


def swap_masks(n: int, *, permutations: int, seed: int) -> tuple[bool, Iterator[np.ndarray]]:
    """The relabellings of a paired randomization test, in blocks of ``(k, n)`` booleans.

    ``True`` at ``[r, i]`` swaps which system record ``i``'s two values belong to (for a mean
    difference: flips the sign of that record's difference). When ``2**n <= permutations``
    every one of the ``2**n`` relabellings is listed once (exact test, as scipy's
    ``permutation_test`` does in that case); otherwise ``permutations`` are drawn at random, each
    record swapped with probability 1/2. Returns ``(exact, blocks)``.
    """
    _check_count("permutations", permutations)
    if n < 1:
        raise ValueError("a randomization test needs at least one record")
    exact = n < 63 and 2**n <= permutations
    block = max(1, _BLOCK_CELLS // n)
    if exact:
        return True, _all_masks(n, block)
    # A stream independent of the bootstrap's, which uses default_rng(seed) itself.
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))
    return False, _random_masks(rng, n, permutations, block)


def _all_masks(n: int, block: int) -> Iterator[np.ndarray]:
    bits = np.arange(n, dtype=np.int64)
    for start in range(0, 2**n, block):
        rows = np.arange(start, min(start + block, 2**n), dtype=np.int64)
        yield ((rows[:, None] >> bits) & 1).astype(bool)


def _random_masks(rng: np.random.Generator, n: int, total: int, block: int) -> Iterator[np.ndarray]:
    width = (n + 7) // 8
    for start in range(0, total, block):
        size = min(block, total - start)
        # Eight fair coin flips per random byte: far cheaper than one integer draw per record.
        raw = rng.integers(0, 256, size=(size, width), dtype=np.uint8)
        yield np.unpackbits(raw, axis=1, count=n).astype(bool)


def randomization_test(
    statistic: Callable[[np.ndarray], np.ndarray],
    n: int,
    *,
    permutations: int = 10_000,
    seed: int = 0,
) -> tuple[np.ndarray, bool]:
    """Two-sided paired randomization test of statistics that change sign with the labels.

    ``statistic`` receives a block of swap masks (see :func:`swap_masks`) and returns ``(k, m)``
    values (``system - baseline`` after the swaps); the observed value is its result with no
    swap. The p-value of a column is the share of relabellings whose statistic is at least as far
    from 0 as the observed one: ``count / 2**n`` when every relabelling is enumerated (exact),
    else ``(count + 1) / (permutations + 1)`` (Phipson and Smyth 2010: a Monte Carlo p-value is
    never 0). Returns ``(p_values, exact)``.
    """
    exact, blocks = swap_masks(n, permutations=permutations, seed=seed)
    observed = np.asarray(statistic(np.zeros((1, n), dtype=bool)), dtype=np.float64)
    observed = observed.reshape(-1)
    count = np.zeros(len(observed), dtype=np.int64)
    total = 0
    for mask in blocks:
        values = np.asarray(statistic(mask), dtype=np.float64).reshape(len(mask), -1)
        count += extreme_counts(observed, values)
        total += len(mask)
    p = count / total if exact else (count + 1) / (total + 1)
    return np.minimum(p, 1.0), exact


def extreme_counts(observed: np.ndarray, relabelled: np.ndarray) -> np.ndarray:
    """Per column, how many relabelled statistics (rows) are at least as far from 0 as the
    observed one (ties decided with a relative tolerance)."""
    size = np.abs(np.asarray(observed, dtype=np.float64))
    return (np.abs(relabelled) >= size - _TIE_RTOL * size).sum(axis=0)


def paired_randomization_test(
    differences: np.ndarray, *, permutations: int = 10_000, seed: int = 0
) -> tuple[np.ndarray | float, bool]:
    """Two-sided sign-flip test of the mean of paired differences (``system - baseline``).

    ``differences`` is ``(n,)`` or ``(n, m)``; returns the p-value (or ``m`` of them, the
    columns sharing the relabellings) and whether the test was exact. It is scipy's
    ``permutation_test(..., permutation_type="samples")`` for the mean difference, with the
    p-value conventions of :func:`randomization_test`. The sum is used instead of the mean (the
    same test): sums of integer scores stay exact, so ties are seen as ties.
    """
    d = np.asarray(differences, dtype=np.float64)
    matrix = d.reshape(len(d), -1)
    p, exact = randomization_test(lambda s: (1.0 - 2.0 * s) @ matrix, len(matrix),
                                  permutations=permutations, seed=seed)
    return (float(p[0]) if d.ndim == 1 else p), exact


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment (Holm 1979) of one family of p-values.

    The i-th smallest of m p-values becomes ``max over j <= i of min(1, (m - j + 1) * p_(j))``:
    it controls the family-wise error rate under any dependence between the tests. NaN entries
    (no test) are left out of the family and stay NaN.
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    present = np.flatnonzero(~np.isnan(p))
    m = len(present)
    if m == 0:
        return out
    order = present[np.argsort(p[present], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def _check_count(name: str, value: int) -> None:
    check_int(name, value, 1, ValueError)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
