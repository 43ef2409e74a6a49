"""How far raters agree: the statistics of two raters' grades on the same records (``rageval
agree``: exact and adjacent agreement, Cohen's kappa with quadratic weights, Spearman's rho,
Kendall's tau-b) and Krippendorff's alpha of several raters (a judge panel's members). Pure
numpy: scipy is only a test dependency, and parity tests hold these to ``scipy.stats`` and the
``krippendorff`` package, so the numbers are the same on every machine.

**Two raters.** :func:`agreement` gives every statistic ``rageval agree`` reports for one pair
of raters: exact and adjacent agreement, Cohen's kappa with quadratic weights, Spearman's rho,
Kendall's tau-b (both O(n log^2 n) here), the confusion matrix and the means; a statistic
undefined on the data is None, with its reason.

**Several raters.** Krippendorff's alpha: how far several raters agree on the items they all
rated, beyond what their values' spread would give by chance, with missing ratings allowed
(Krippendorff, *Content Analysis*, 2004), as the ``krippendorff`` package computes it.

``ratings`` has one row per rater and one column per item, NaN where a rater gave nothing
(an abstention). Items with fewer than two ratings are not pairable and count for nothing.
With the coincidence matrix ``o`` of the pairable values (each item's ordered pairs of ratings
weighted by 1 / (ratings - 1)), ``n_c`` its margins and ``n`` their sum::

    alpha = 1 - (n - 1) * sum(o[c, k] * d(c, k)) / sum(n_c * n_k * d(c, k))

where ``d`` is the squared distance of the level of measurement: ``nominal`` (0 when equal,
else 1), ``interval`` ((c - k) squared) or ``ordinal`` (the number of values from c to k,
less half of c's and k's, squared).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rageval.core.errors import UsageError
from rageval.stats.exact import exact_mean

__all__ = [
    "LEVELS",
    "Agreement",
    "agreement",
    "annotator_agreement",
    "kendall_tau_b",
    "krippendorff_alpha",
    "quadratic_kappa",
    "round_half_up",
    "spearman_rho",
]

_NO_RECORDS = "no records to compare"


@dataclass(frozen=True)
class Agreement:
    """Agreement statistics of two raters over the same ``n`` records.

    A statistic that is undefined on this data (no records, a constant rater, ...) is ``None``
    and ``undefined`` maps its name to the reason, so that an undefined kappa is never shown
    as 0 or 1. ``confusion[i][j]`` counts records the first rater graded ``scale[0] + i`` and
    the second ``scale[0] + j``. ``rounded`` counts non-integer values (means of several judge
    samples) that were rounded half up for the grade-based statistics.
    """

    n: int
    scale: tuple[int, int]
    exact: float | None
    adjacent: float | None
    kappa: float | None
    spearman: float | None
    kendall: float | None
    confusion: tuple[tuple[int, ...], ...]
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    rounded: int = 0
    undefined: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "scale": list(self.scale),
            "exact": self.exact,
            "adjacent": self.adjacent,
            "kappa_quadratic": self.kappa,
            "spearman": self.spearman,
            "kendall_tau_b": self.kendall,
            "confusion": {"rows": "first rater", "columns": "second rater",
                          "labels": list(range(self.scale[0], self.scale[1] + 1)),
                          "counts": [list(row) for row in self.confusion]},
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "mean_diff": self.mean_diff,
            "rounded": self.rounded,
            "undefined": dict(self.undefined),
        }


def agreement(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    scale: tuple[int, int],
) -> Agreement:
    """Agreement of two raters' grades on the same records, over the scale ``(lo, hi)``.

    ``a[i]`` and ``b[i]`` grade the same record; both must be finite (leave unscored records
    out first). Non-integer values are rounded half up for exact and adjacent agreement, kappa
    and the confusion matrix; the correlations and means use the raw values. A rounded value
    outside the scale is a :class:`UsageError`: silently widening the scale would change kappa.
    """
    x, y = _vectors(a, b)
    lo, hi = _check_scale(scale)
    rx, ry = round_half_up(x), round_half_up(y)
    for values in (rx, ry):
        outside = values[(values < lo) | (values > hi)]
        if outside.size:
            raise UsageError(f"grade {int(outside[0])} is outside the scale {lo}-{hi}")
    n = x.size
    undefined: dict[str, str] = {}
    confusion = _confusion(rx - lo, ry - lo, hi - lo + 1)
    rounded = int(np.count_nonzero(rx != x) + np.count_nonzero(ry != y))
    if n == 0:
        for name in ("exact", "adjacent", "kappa", "spearman", "kendall", "means"):
            undefined[name] = _NO_RECORDS
        return Agreement(0, (lo, hi), None, None, None, None, None, _as_tuples(confusion),
                         None, None, None, rounded, undefined)
    kappa, why = _kappa_from_confusion(confusion)
    if why is not None:
        undefined["kappa"] = why
    spearman, kendall = spearman_rho(x, y), kendall_tau_b(x, y)
    why = _correlation_undefined(x, y)
    if why is not None:
        undefined["spearman"] = undefined["kendall"] = why
    diff = np.abs(rx - ry)
    return Agreement(
        n=n, scale=(lo, hi),
        exact=float(np.mean(diff == 0)), adjacent=float(np.mean(diff <= 1)),
        kappa=kappa, spearman=spearman, kendall=kendall,
        confusion=_as_tuples(confusion),
        mean_a=exact_mean(x), mean_b=exact_mean(y), mean_diff=exact_mean(x) - exact_mean(y),
        rounded=rounded, undefined=undefined,
    )


def quadratic_kappa(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                    scale: tuple[int, int]) -> float | None:
    """Cohen's kappa with quadratic weights over every grade of ``scale`` (None if undefined).

    Same value as ``sklearn.metrics.cohen_kappa_score(a, b, weights="quadratic",
    labels=range(lo, hi + 1))`` wherever sklearn's is finite, except that two constant raters
    give None rather than NaN or 0: with no variation there is nothing to chance-correct.
    """
    return agreement(a, b, scale).kappa


def _kappa_from_confusion(confusion: np.ndarray) -> tuple[float | None, str | None]:
    """kappa = 1 - sum(w * observed) / sum(w * expected), w_ij = (i - j)^2.

    Expected counts are the outer product of the two raters' marginals over n. When only one
    rater is constant, observed equals expected and kappa is 0 (that rater's grades carry no
    information beyond chance). When both are constant, kappa is 0/0 if they gave the same
    grade and an artefact of a single cell otherwise: undefined either way.
    """
    counts = confusion.astype(np.float64)
    n = counts.sum()
    rows, cols = counts.sum(axis=1), counts.sum(axis=0)
    if np.count_nonzero(rows) <= 1 and np.count_nonzero(cols) <= 1:
        return None, "both raters gave every record the same grade"
    k = counts.shape[0]
    index = np.arange(k, dtype=np.float64)
    weights = (index[:, None] - index[None, :]) ** 2
    expected = np.outer(rows, cols) / n
    kappa = 1.0 - float((weights * counts).sum()) / float((weights * expected).sum())
    return kappa, None


def spearman_rho(a: Sequence[float] | np.ndarray,
                 b: Sequence[float] | np.ndarray) -> float | None:
    """Spearman's rho: Pearson's correlation of average ranks (ties share their mean rank).

    None when undefined: fewer than 2 values, or a constant input. Matches
    ``scipy.stats.spearmanr(a, b).statistic`` (which is NaN there).
    """
    x, y = _vectors(a, b)
    if _correlation_undefined(x, y) is not None:
        return None
    rx, ry = _average_ranks(x), _average_ranks(y)
    dx, dy = rx - rx.mean(), ry - ry.mean()
    rho = float(np.dot(dx, dy) / math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy))))
    return max(-1.0, min(1.0, rho))


def kendall_tau_b(a: Sequence[float] | np.ndarray,
                  b: Sequence[float] | np.ndarray) -> float | None:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_a) (n0 - ties_b)).

    Judge grades are heavily tied, which is why tau-b (not tau-a) is the right variant. With
    n0 = n(n-1)/2, ties counted as tied pairs and ``joint`` the pairs tied in both,
    concordant - discordant = n0 - ties_a - ties_b + joint - 2 * discordant, and the discordant
    pairs are the inversions of b once records are sorted by (a, b). None when undefined
    (fewer than 2 values, a constant input). Matches ``scipy.stats.kendalltau(a, b)``.
    """
    x, y = _vectors(a, b)
    if _correlation_undefined(x, y) is not None:
        return None
    n = x.size
    codes_x, _ = _dense_codes(x)
    codes_y, size_y = _dense_codes(y)
    pairs = n * (n - 1) // 2
    ties_x, ties_y = _tied_pairs(codes_x), _tied_pairs(codes_y)
    joint = _tied_pairs(codes_x.astype(np.int64) * size_y + codes_y)
    order = np.lexsort((codes_y, codes_x))
    discordant = _count_inversions(codes_y[order], size_y)
    numerator = pairs - ties_x - ties_y + joint - 2 * discordant
    tau = numerator / math.sqrt(float(pairs - ties_x) * float(pairs - ties_y))
    return max(-1.0, min(1.0, tau))


def _vectors(a: Sequence[float] | np.ndarray,
             b: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1 or x.size != y.size:
        raise UsageError(f"agreement needs two 1-d sequences of equal length, got shapes "
                         f"{x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise UsageError("agreement needs finite grades: leave unscored (NaN) records out")
    return x, y


def _check_scale(scale: tuple[int, int]) -> tuple[int, int]:
    try:
        lo, hi = scale
        whole = all(not isinstance(v, bool) and float(v).is_integer() for v in (lo, hi))
    except (TypeError, ValueError):
        whole = False
    if not whole or lo > hi:
        raise UsageError(f"scale must be two integers (lowest, highest), got {scale!r}")
    return int(lo), int(hi)


def round_half_up(values: np.ndarray) -> np.ndarray:
    """Half up, not numpy's half-to-even: a mean of 3.5 over two samples is not 'closer' to 4
    than 2.5 is to 3, and banker's rounding would send them different ways."""
    return np.floor(values + 0.5)


def _confusion(rows: np.ndarray, cols: np.ndarray, k: int) -> np.ndarray:
    flat = rows.astype(np.int64) * k + cols.astype(np.int64)
    return np.bincount(flat, minlength=k * k).reshape(k, k)


def _as_tuples(matrix: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(v) for v in row) for row in matrix)


def _correlation_undefined(x: np.ndarray, y: np.ndarray) -> str | None:
    if x.size < 2:
        return "needs at least 2 records"
    const_x, const_y = bool(np.all(x == x[0])), bool(np.all(y == y[0]))
    if const_x and const_y:
        return "both raters gave every record the same score"
    if const_x or const_y:
        which = "first" if const_x else "second"
        return f"the {which} rater gave every record the same score"
    return None


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span (scipy 'average')."""
    n = values.size
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts_mask = np.empty(n, dtype=bool)
    starts_mask[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts_mask[1:])
    starts = np.flatnonzero(starts_mask)
    ends = np.append(starts[1:], n)
    mean_rank = (starts + ends + 1) / 2.0  # mean of start+1 .. end
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = mean_rank[np.cumsum(starts_mask) - 1]
    return ranks


def _dense_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    unique, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64).reshape(-1), int(unique.size)


def _tied_pairs(codes: np.ndarray) -> int:
    _, counts = np.unique(codes, return_counts=True)
    counts = counts.astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _count_inversions(codes: np.ndarray, size: int) -> int:
    """Pairs i < j with codes[i] > codes[j], by a bottom-up merge sort vectorised per level.

    At each level the array is made of sorted blocks of ``width``; for each element of a right
    block, the elements of its left block that are greater are counted with one searchsorted
    over all left blocks at once (keys offset by block pair so that blocks never mix), then
    each pair of blocks is merged by a single sort of the offset keys.
    """
    n = codes.size
    values = codes.astype(np.int64)
    index = np.arange(n, dtype=np.int64)
    total = 0
    width = 1
    while width < n:
        pair = index // (2 * width)
        right = (index // width) % 2 == 1
        keys = pair * size + values
        left_keys = keys[~right]
        right_keys, right_pair = keys[right], pair[right]
        upper = np.searchsorted(left_keys, (right_pair + 1) * size, side="left")
        above = np.searchsorted(left_keys, right_keys, side="right")
        total += int((upper - above).sum())
        values = np.sort(keys) - pair * size
        width *= 2
    return total


# ---- several raters: Krippendorff's alpha --------------------------------------------------------

LEVELS = ("nominal", "ordinal", "interval")


def annotator_agreement(ratings: Mapping[str, Mapping[str, float]],
                        scale: tuple[float, float]) -> dict[str, Any] | None:
    """How far human annotators agree (``ratings``: annotator -> record id -> label) on the
    records two or more of them labelled, or None with fewer than two such records:
    Krippendorff's alpha at the interval level, and for exactly two annotators Cohen's kappa
    with quadratic weights over the integer ``scale`` (as ``rageval agree`` computes it; None
    on a scale that is not integer)."""
    annotators = sorted(ratings)
    ids = sorted({i for given in ratings.values() for i in given})
    matrix = np.array([[ratings[who].get(i, np.nan) for i in ids] for who in annotators],
                      dtype=np.float64).reshape(len(annotators), len(ids))
    common = int(((~np.isnan(matrix)).sum(axis=0) >= 2).sum()) if len(ids) else 0
    if len(annotators) < 2 or common < 2:
        return None
    out: dict[str, Any] = {"records": common, "level": "interval",
                           "krippendorff_alpha": krippendorff_alpha(matrix, "interval")}
    if len(annotators) == 2:
        both = ~np.isnan(matrix).any(axis=0)
        lo, hi = scale
        integral = float(lo).is_integer() and float(hi).is_integer()
        out["cohen_kappa_quadratic"] = (
            quadratic_kappa(matrix[0, both], matrix[1, both], (int(lo), int(hi)))
            if integral else None)
    return out


def krippendorff_alpha(ratings: np.ndarray, level: str = "interval") -> float | None:
    """Alpha of ``ratings`` (raters x items, NaN where missing) at ``level``; None when it is
    undefined (no item rated twice, or every pairable value the same)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    data = np.asarray(ratings, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError(f"ratings must be raters x items, got shape {data.shape}")
    pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    domain = np.unique(pairable[~np.isnan(pairable)])
    if len(domain) < 2:
        return None
    coincidences = _coincidences(pairable, domain)
    margins = coincidences.sum(axis=1)
    n = margins.sum()
    distance = _distances(domain, margins, level)
    expected = (margins[:, None] * margins[None, :] * distance).sum()
    if expected == 0:
        return None
    return float(1 - (n - 1) * (coincidences * distance).sum() / expected)


def _coincidences(pairable: np.ndarray, domain: np.ndarray) -> np.ndarray:
    """Each item's ordered pairs of ratings by value, weighted by 1 / (its ratings - 1)."""
    size = len(domain)
    out = np.zeros((size, size))
    for item in pairable.T:
        rated = item[~np.isnan(item)]
        counts = np.bincount(np.searchsorted(domain, rated), minlength=size).astype(float)
        pairs = np.outer(counts, counts) - np.diag(counts)  # a rating is not paired with itself
        out += pairs / (len(rated) - 1)
    return out


def _distances(domain: np.ndarray, margins: np.ndarray, level: str) -> np.ndarray:
    if level == "nominal":
        return 1.0 - np.eye(len(domain))
    if level == "interval":
        return (domain[:, None] - domain[None, :]) ** 2
    cumulative = np.cumsum(margins)
    between = cumulative[None, :] - cumulative[:, None] + margins[:, None]  # sum of n_g, c..k
    ranks = np.abs(np.triu(between) + np.triu(between, 1).T) - (margins[:, None]
                                                                  + margins[None, :]) / 2
    return ranks ** 2
