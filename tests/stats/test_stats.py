"""Paired statistics: bootstrap CI, randomization test and Holm, checked against scipy and
against exhaustive enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from rageval.stats.resampling import (
    bootstrap_ci,
    bootstrap_weights,
    holm,
    paired_bootstrap,
    paired_bootstrap_ci,
    paired_randomization_test,
    randomization_test,
    swap_masks,
)


def _paired(seed: int, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    baseline = rng.random(n)
    system = np.clip(baseline + shift + rng.normal(0, 0.2, n), 0, 1)
    return baseline, system


def _enumerated_p(d: np.ndarray) -> float:
    """The exact two-sided sign-flip p-value, by brute force over all 2**n sign vectors."""
    observed = abs(d.sum())
    hits = sum(abs(np.dot(signs, d)) >= observed - 1e-9 * observed
               for signs in itertools.product((1.0, -1.0), repeat=len(d)))
    return hits / 2 ** len(d)


def _holm_reference(p: list[float]) -> list[float]:
    """Holm written out the textbook way, one hypothesis at a time."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


# ---- bootstrap -------------------------------------------------------------------------


def test_bootstrap_weights_count_each_resample() -> None:
    blocks = list(bootstrap_weights(37, resamples=1000, seed=4))
    weights = np.concatenate(blocks)
    assert weights.shape == (1000, 37)
    assert np.all(weights.sum(axis=1) == 37)
    assert np.all(weights == np.round(weights)) and weights.min() >= 0


def test_paired_ci_uses_the_draws_of_bootstrap_ci() -> None:
    """The same seed draws the same resamples as the summary's bootstrap_ci."""
    baseline, system = _paired(1, 120, 0.05)
    d = system - baseline
    ci = paired_bootstrap_ci(d, resamples=3000, seed=9)
    assert ci == pytest.approx(bootstrap_ci(d, resamples=3000, seed=9), abs=1e-12)


def test_paired_ci_close_to_scipy_percentile_bootstrap() -> None:
    baseline, system = _paired(2, 200, 0.04)
    d = system - baseline
    ours = paired_bootstrap_ci(d, resamples=10_000, seed=0)
    ref = sps.bootstrap((d,), np.mean, method="percentile", n_resamples=10_000,
                        confidence_level=0.95, random_state=np.random.default_rng(1))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    # Monte Carlo error of a 2.5% quantile from 10k resamples is about 1% of the width.
    assert ours[0] == pytest.approx(ref.confidence_interval.low, abs=0.05 * width)
    assert ours[1] == pytest.approx(ref.confidence_interval.high, abs=0.05 * width)


def test_paired_ci_columns_share_resamples() -> None:
    baseline, system = _paired(3, 50, 0.1)
    d = system - baseline
    both = paired_bootstrap_ci(np.column_stack([d, 2 * d]), resamples=500, seed=3)
    assert both.shape == (2, 2)
    assert both[0] == pytest.approx(paired_bootstrap_ci(d, resamples=500, seed=3))
    assert both[1] == pytest.approx(2 * both[0])


def test_paired_ci_of_identical_systems_is_zero() -> None:
    assert list(paired_bootstrap_ci(np.zeros(25), resamples=200)) == [0.0, 0.0]


def test_paired_bootstrap_leaves_out_undefined_resamples() -> None:
    def statistic(weights: np.ndarray) -> np.ndarray:
        # Defined only when record 0 is drawn.
        return np.where(weights[:, 0] > 0, 1.0, np.nan)[:, None]

    assert list(paired_bootstrap(statistic, 5, resamples=300, seed=0)[0]) == [1.0, 1.0]
    never = paired_bootstrap(lambda w: np.full((len(w), 1), np.nan), 3, resamples=10)
    assert np.isnan(never).all()


# ---- randomization test ----------------------------------------------------------------


def test_randomization_close_to_scipy_permutation_test() -> None:
    baseline, system = _paired(5, 40, 0.05)
    d = system - baseline
    p, exact = paired_randomization_test(d, permutations=20_000, seed=0)
    ref = sps.permutation_test(
        (system, baseline), lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples", alternative="two-sided", n_resamples=20_000,
        random_state=np.random.default_rng(1),
    )
    assert not exact
    assert 0.005 < ref.pvalue < 0.5  # a p-value where Monte Carlo error matters
    # Both are Monte Carlo estimates with standard error <= 0.0035: allow about 4 of them.
    assert p == pytest.approx(ref.pvalue, abs=0.02)


@pytest.mark.parametrize("seed", range(4))
def test_randomization_is_exact_for_tiny_n(seed: int) -> None:
    rng = np.random.default_rng(seed)
    baseline = rng.integers(1, 6, size=9).astype(float)  # judge-like scores: many ties
    system = np.clip(baseline + rng.integers(-1, 3, size=9), 1, 5)
    d = system - baseline
    p, exact = paired_randomization_test(d, permutations=10_000, seed=seed)
    assert exact
    assert p == _enumerated_p(d)
    ref = sps.permutation_test(
        (system, baseline), lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples", alternative="two-sided", n_resamples=np.inf,
    )
    assert p == pytest.approx(ref.pvalue, abs=1e-12)


def test_exact_only_when_enumeration_fits_the_budget() -> None:
    assert swap_masks(13, permutations=10_000, seed=0)[0]  # 8192 relabellings
    assert not swap_masks(14, permutations=10_000, seed=0)[0]
    exact, blocks = swap_masks(5, permutations=32, seed=0)
    rows = np.concatenate(list(blocks))
    assert exact and len({r.tobytes() for r in rows}) == 32


def test_monte_carlo_p_value_is_never_zero() -> None:
    p, exact = paired_randomization_test(np.ones(60), permutations=999, seed=0)
    assert not exact
    assert p == pytest.approx(1 / 1000)


def test_identical_systems_have_p_one() -> None:
    for n in (5, 40):
        p, _ = paired_randomization_test(np.zeros(n), permutations=500)
        assert p == 1.0


def test_randomization_is_seeded() -> None:
    d = _paired(6, 30, 0.03)[1] - _paired(6, 30, 0.03)[0]
    first = paired_randomization_test(d, permutations=2000, seed=1)
    assert first == paired_randomization_test(d, permutations=2000, seed=1)
    assert first != paired_randomization_test(d, permutations=2000, seed=2)


def test_generic_statistic_matches_sign_flips() -> None:
    d = _paired(7, 25, 0.05)[1] - _paired(7, 25, 0.05)[0]
    generic, _ = randomization_test(lambda s: ((1.0 - 2.0 * s) @ d)[:, None], 25,
                                    permutations=3000, seed=5)
    assert generic[0] == paired_randomization_test(d, permutations=3000, seed=5)[0]


def test_bad_budgets_are_refused() -> None:
    with pytest.raises(ValueError, match="permutations"):
        paired_randomization_test(np.ones(3), permutations=0)
    with pytest.raises(ValueError, match="resamples"):
        paired_bootstrap_ci(np.ones(3), resamples=0)


# ---- Holm ------------------------------------------------------------------------------


def test_holm_worked_example() -> None:
    # Sorted: 0.005 (x4) = 0.02, 0.01 (x3) = 0.03, 0.03 (x2) = 0.06, 0.04 (x1) -> max 0.06.
    assert list(holm([0.01, 0.04, 0.03, 0.005])) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_skips_missing() -> None:
    out = holm([0.5, np.nan, 0.9])
    assert out[0] == 1.0 and out[2] == 1.0 and np.isnan(out[1])
    assert holm([]).size == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_holm_matches_reference(p: list[float]) -> None:
    adjusted = holm(p)
    assert list(adjusted) == pytest.approx(_holm_reference(p))
    assert np.all(adjusted >= np.asarray(p) - 1e-15) and np.all(adjusted <= 1)


# ---- properties ------------------------------------------------------------------------

_differences = st.lists(st.integers(-3, 3).map(float) | st.floats(-1, 1), min_size=1,
                        max_size=30).map(np.array)


@settings(max_examples=40, deadline=None)
@given(_differences, st.integers(0, 2**16))
def test_swapping_the_systems_negates_ci_and_keeps_p(d: np.ndarray, seed: int) -> None:
    lo, hi = paired_bootstrap_ci(d, resamples=300, seed=seed)
    nlo, nhi = paired_bootstrap_ci(-d, resamples=300, seed=seed)
    assert nlo == pytest.approx(-hi, abs=1e-12) and nhi == pytest.approx(-lo, abs=1e-12)
    p, exact = paired_randomization_test(d, permutations=500, seed=seed)
    assert (p, exact) == paired_randomization_test(-d, permutations=500, seed=seed)
    assert 0 < p <= 1
    assert lo <= hi


def test_sign_flips_are_a_function_of_seed_unit_and_relabelling() -> None:
    from rageval.stats.poisson import poisson_weights, seeded_keys, sign_flips, unit_keys

    seeded = seeded_keys(unit_keys([f"r{i}" for i in range(4000)]), 5)
    flips = sign_flips(seeded, 300)
    assert set(np.unique(flips)) == {-1.0, 1.0}
    assert np.array_equal(sign_flips(seeded[17:18], 300), flips[17:18])  # alone or in a batch
    assert np.array_equal(sign_flips(seeded, 70), flips[:, :70])  # more relabellings extend
    assert abs(flips.mean()) < 0.01  # each sign with probability 1/2
    assert not np.array_equal(sign_flips(seeded_keys(unit_keys(["r0"]), 6), 300), flips[:1])
    weights = poisson_weights(seeded, 300)  # another stream than the unit's Poisson weights
    assert abs(np.corrcoef(weights.ravel(), flips.ravel())[0, 1]) < 0.01


def test_group_rows_sum_each_column_as_group_sums_does() -> None:
    from rageval.stats.groups import group_rows, group_sums

    rng = np.random.default_rng(1)
    groups = rng.integers(0, 5, 40)
    columns = rng.integers(0, 9, (40, 3))
    summed = group_rows(columns, groups, 6)
    assert summed.dtype == columns.dtype and summed.shape == (6, 3)  # integers stay integers
    everything = np.ones(40, dtype=bool)
    for k in range(3):
        assert np.array_equal(summed[:, k], group_sums(columns[:, k].astype(float), everything,
                                                       groups, 6)[0])
    assert group_rows(columns, None, 40) is columns  # each row a group of its own
