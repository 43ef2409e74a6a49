"""Correctly rounded sums and means: each the float nearest the exact mean of its values, in
any order and any split, held to exact rational arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from rageval.stats.exact import ExactSums, exact_group_means, exact_mean


def _exact(values: np.ndarray) -> float:
    return float(sum(Fraction(v) for v in values.tolist()) / len(values))


def _values(kind: int, rng: np.random.Generator, n: int) -> np.ndarray:
    if kind == 0:  # scores in [0, 1)
        return rng.random(n)
    if kind == 1:  # fifths: a tool-call F1's values
        return rng.integers(0, 6, n) / 5.0
    if kind == 2:  # signs and exponents far apart
        return rng.random(n) * 10.0 ** rng.integers(-300, 300, n) * rng.choice([-1, 1], n)
    return np.r_[rng.random(n - 1) * 1e300, [-1e300]]  # near the largest float


@pytest.mark.parametrize("kind", range(4))
def test_means_are_the_exact_mean_correctly_rounded(kind: int) -> None:
    for trial in range(60):
        rng = np.random.default_rng(100 * kind + trial)
        values = _values(kind, rng, int(rng.integers(1, 80)))
        expected = _exact(values)
        assert exact_mean(values) == expected
        assert exact_mean(values[::-1]) == expected  # whatever the order
        sums = ExactSums(2)
        for part in np.array_split(values, 3):  # whatever the split
            sums.add(np.column_stack([part, -part]))
        assert (sums.mean(0, len(values)), sums.mean(1, len(values))) == (expected, -expected)


@pytest.mark.parametrize("kind", range(4))
def test_group_means_are_each_groups_exact_mean(kind: int) -> None:
    for trial in range(30):
        rng = np.random.default_rng(1000 + 100 * kind + trial)
        values = _values(kind, rng, int(rng.integers(2, 120)))
        count = int(rng.integers(1, 12))
        groups = rng.integers(0, count, len(values))
        got = exact_group_means(values, groups, count)
        for group in range(count):
            mine = values[groups == group]
            if len(mine):
                assert got[group] == _exact(mine), (trial, group)
            else:
                assert math.isnan(got[group])


def test_the_mean_of_the_report_and_values_that_are_not_finite() -> None:
    assert float(np.mean([0.0, 0.2, 0.4])) == 0.20000000000000004  # added one by one
    assert exact_mean(np.array([0.0, 0.2, 0.4])) == 0.2
    assert math.isnan(exact_mean(np.array([])))
    assert exact_mean(np.array([1.0, math.inf])) == math.inf
    means = exact_group_means(np.array([1.0, math.inf, 0.2, 0.4, 0.0]),
                              np.array([0, 0, 1, 1, 1]), 3)
    assert means[0] == math.inf and means[1] == 0.2 and math.isnan(means[2])
