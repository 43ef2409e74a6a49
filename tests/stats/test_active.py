"""Active inference for a mean (Zrnic and Candès 2024) against its formulas computed by hand,
its selection probabilities' properties, and the label planner against ppi_py's power analysis."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.calibration import MIN_LABELLED
from rageval.stats.active import DEFAULT_MIX, active_mean, selection_probabilities
from rageval.stats.calibration import classical_mean
from rageval.stats.label_plan import (
    active_half_width,
    label_moments,
    plan_labels,
    uniform_half_width,
)

Z95 = 1.959963984540054
NAN = math.nan


def test_active_mean_is_the_papers_formula_by_hand() -> None:
    """Four records, two labelled: terms f + (y - f) * xi / pi, their mean and ddof-0 sd."""
    f, y, pi = [3.0, 4.0, 2.0, 5.0], [NAN, 3.0, 4.0, NAN], [0.5, 0.25, 0.5, 1.0]
    terms = [3.0, 4.0 + (3.0 - 4.0) / 0.25, 2.0 + (4.0 - 2.0) / 0.5, 5.0]  # 3, 0, 6, 5
    mean = sum(terms) / 4
    se = math.sqrt(sum((t - mean) ** 2 for t in terms) / 4) / math.sqrt(4)
    estimate = active_mean(f, y, pi)
    assert estimate.mean == pytest.approx(3.5, abs=1e-12) == mean
    assert estimate.ci == pytest.approx((mean - Z95 * se, mean + Z95 * se), abs=1e-12)
    assert (estimate.lam, estimate.labelled, estimate.unlabelled) == (1.0, 2, 2)


def test_power_tuned_active_mean_by_hand() -> None:
    """lam = -cov(A, B) / var(B) with A = y xi / pi, B = f (1 - xi / pi), clipped to [0, 1]."""
    f = np.array([3.0, 4.0, 2.0, 5.0, 1.0, 4.0])
    y = np.array([NAN, 3.0, 4.0, NAN, 2.0, NAN])
    pi = np.array([0.5, 0.25, 0.5, 1.0, 0.8, 0.4])
    xi = ~np.isnan(y)
    a = np.where(xi, np.nan_to_num(y) / pi, 0.0)
    b = f * (1 - xi / pi)
    lam = float(np.clip(-np.mean((a - a.mean()) * (b - b.mean())) / b.var(), 0, 1))
    terms = lam * f + np.where(xi, (np.nan_to_num(y) - lam * f) / pi, 0.0)
    tuned = active_mean(f, y, pi, lam=None)
    assert 0 < tuned.lam < 1 and tuned.lam == pytest.approx(lam, abs=1e-12)
    assert tuned.mean == pytest.approx(terms.mean(), abs=1e-12)
    half = Z95 * terms.std() / math.sqrt(len(terms))
    assert tuned.ci == pytest.approx((terms.mean() - half, terms.mean() + half), abs=1e-12)
    fixed = active_mean(f, y, pi, lam=0.5)
    assert fixed.lam == 0.5 and fixed.mean == pytest.approx(
        float(np.mean(0.5 * f + np.where(xi, (np.nan_to_num(y) - 0.5 * f) / pi, 0.0))))


def test_every_record_labelled_for_sure_is_the_plain_mean() -> None:
    rng = np.random.default_rng(3)
    y = rng.integers(1, 6, 40).astype(float)
    f = np.clip(y + rng.normal(0, 1, 40), 1, 5)
    mean, ci = classical_mean(y)
    for lam in (1.0, None, 0.3):
        estimate = active_mean(f, y, np.ones(40), lam=lam)
        assert estimate.mean == pytest.approx(mean, abs=1e-12)
        assert estimate.ci == pytest.approx(ci, abs=1e-12)


@pytest.mark.parametrize(("args", "message"), [
    (([1.0, 2.0], [1.0], [1.0, 1.0]), "aligned"),
    (([1.0, 2.0, 3.0], [1.0, NAN, NAN], [1.0, 1.0, 1.0]), "at least 2 labelled"),
    (([1.0, 2.0], [1.0, 2.0], [0.0, 1.0]), r"\(0, 1\]"),
    (([1.0, 2.0], [1.0, 2.0], [0.5, 1.5]), r"\(0, 1\]"),
    (([1.0, NAN], [1.0, 2.0], [1.0, 1.0]), "finite"),
    (([1.0, 2.0], [1.0, math.inf], [1.0, 1.0]), "finite"),
])
def test_active_mean_refuses_bad_input(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        active_mean(*args)


def test_active_mean_refuses_a_weight_outside_zero_one() -> None:
    with pytest.raises(ValueError, match="lam"):
        active_mean([1.0, 2.0], [1.0, 2.0], [1.0, 1.0], lam=1.5)


uncertainties = st.lists(st.floats(0, 10, allow_nan=False), min_size=2, max_size=60)


@settings(max_examples=200, deadline=None)
@given(uncertainties, st.floats(0.01, 0.99), st.floats(0.01, 1.0))
def test_selection_probabilities_spend_the_budget_and_follow_the_uncertainty(
        u: list[float], share: float, mix: float) -> None:
    budget = share * len(u)
    pi = selection_probabilities(u, budget, mix=mix)
    assert pi.sum() == pytest.approx(budget, rel=1e-9)
    assert ((pi > 0) & (pi <= 1)).all()
    order = np.argsort(u, kind="stable")
    assert (np.diff(pi[order]) >= -1e-12).all()  # monotone in the uncertainty


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 80), st.floats(0, 5, allow_nan=False), st.floats(0.01, 0.99),
       st.floats(0, 1))
def test_equal_uncertainties_give_the_uniform_rule(n: int, value: float, share: float,
                                                   mix: float) -> None:
    pi = selection_probabilities([value] * n, share * n, mix=mix)
    assert pi == pytest.approx(np.full(n, share), rel=1e-9)


def test_selection_probabilities_cap_at_one_and_hand_the_rest_on() -> None:
    pi = selection_probabilities([10.0, 0.0, 0.0, 0.0, 0.0], 2, mix=0.5)
    # uncapped: 2 * (0.5 * 1 + 0.5 / 5) = 1.2 for the first; capped, the other four share 1
    assert pi == pytest.approx([1.0, 0.25, 0.25, 0.25, 0.25])
    assert (selection_probabilities([1.0, 2.0], 5) == 1).all()  # a budget past the pool


@pytest.mark.parametrize(("u", "budget", "mix", "message"), [
    ([], 1, 0.1, "non-empty"),
    ([[1.0, 2.0]], 1, 0.1, "1-d"),
    ([1.0, -1.0], 1, 0.1, "non-negative"),
    ([1.0, math.nan], 1, 0.1, "finite"),
    ([1.0, 2.0], 0, 0.1, "budget"),
    ([1.0, 2.0], math.nan, 0.1, "budget"),
    ([1.0, 2.0], 1, 1.5, "mix"),
    ([1.0, 0.0], 1, 0.0, "no chance"),
])
def test_selection_probabilities_refuse_bad_input(u: list, budget: float, mix: float,
                                                  message: str) -> None:
    with pytest.raises(ValueError, match=message):
        selection_probabilities(u, budget, mix=mix)


def test_the_default_mix_is_the_benchmarks() -> None:
    assert DEFAULT_MIX == 0.3


def _pool(seed: int, size: int = 3000, hard: float = 0.2,
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, judge scores and uncertainties: the judge nearly right on most records, off
    on the hard ones, and unsure where it is off."""
    rng = np.random.default_rng(seed)
    y = np.clip(np.round(3 + 1.2 * rng.normal(size=size)), 1, 5)
    is_hard = rng.random(size) < hard
    error = np.where(is_hard, rng.normal(0, 1.2, size), rng.normal(0, 0.1, size))
    uncertainty = np.where(is_hard, 1.0, 0.1) * rng.uniform(0.8, 1.2, size)
    return y, y + error, uncertainty


def _labelled(y: np.ndarray, count: int, seed: int) -> np.ndarray:
    labels = np.full(len(y), NAN)
    chosen = np.random.default_rng(seed).choice(len(y), count, replace=False)
    labels[chosen] = y[chosen]
    return labels


@pytest.mark.parity
@pytest.mark.parametrize(("seed", "width"), [(0, 0.05), (1, 0.1), (2, 0.08), (3, 0.06)])
def test_the_uniform_plan_agrees_with_ppi_py_power_analysis(seed: int, width: float) -> None:
    """PPI++'s plan (tuned) is ppi_py's cheapest pair with n + N = the pool, at zero cost per
    prediction: the labels whose effective sample size gives the half-width."""
    ppi_py = pytest.importorskip("ppi_py")
    y, f, u = _pool(seed)
    labels = _labelled(y, 60, seed)
    plan = plan_labels(f, labels, width, uncertainty=u, tuned=True)
    known = ~np.isnan(labels)
    effective = Z95 ** 2 * float(y[known].var()) / width ** 2
    reference = ppi_py.ppi_mean_power(y[known], f[known], cost_Y=1.0, cost_Yhat=1e-12,
                                      effective_n=effective, n_max=len(y))
    assert plan.uniform_total is not None
    assert abs(plan.uniform_total - reference["n"]) <= 1  # ppi_py rounds, the plan rounds up
    assert plan.uniform_more == plan.uniform_total - 60


def test_the_uniform_plan_is_the_first_count_that_reaches_the_width() -> None:
    y, f, _u = _pool(4)
    labels = _labelled(y, 50, 4)
    for tuned in (False, True):
        plan = plan_labels(f, labels, 0.1, tuned=tuned)
        moments = label_moments(f, labels)
        total = plan.uniform_total
        assert total is not None and total > 50
        assert uniform_half_width(total, moments, tuned=tuned) <= 0.1
        assert uniform_half_width(total - 1, moments, tuned=tuned) > 0.1
    assert plan.active_total is None and plan.active_reason is not None  # no uncertainty


def test_active_needs_fewer_labels_where_the_uncertainty_predicts_the_error() -> None:
    y, f, u = _pool(5)
    labels = _labelled(y, 40, 5)
    plan = plan_labels(f, labels, 0.06, uncertainty=u)
    assert plan.refused is None and plan.active_total is not None
    assert plan.uniform_total is not None and plan.active_total < 0.7 * plan.uniform_total
    moments = label_moments(f, labels)
    assert active_half_width(plan.active_total, moments, u) <= 0.06
    assert active_half_width(plan.active_total - 1, moments, u) > 0.06
    assert plan.active_more == plan.active_total - 40


def test_labels_chosen_actively_are_weighted_back() -> None:
    """Labels drawn with the active rule's probabilities estimate the same variances as
    labels drawn uniformly: the hard records they favour count for less."""
    y, f, u = _pool(6, size=20000)
    pi = selection_probabilities(u, 2000)
    drawn = np.random.default_rng(6).random(len(y)) < pi
    active = label_moments(f, np.where(drawn, y, NAN), pi)
    uniform = label_moments(f, _labelled(y, 2000, 6))
    assert active.var_residual == pytest.approx(uniform.var_residual, rel=0.15)
    unweighted = label_moments(f, np.where(drawn, y, NAN))
    assert unweighted.var_residual > 1.5 * active.var_residual


def test_the_plan_refuses_too_few_labels_and_a_width_already_reached() -> None:
    y, f, u = _pool(7)
    few = plan_labels(f, _labelled(y, MIN_LABELLED - 1, 7), 0.05, uncertainty=u)
    assert few.refused is not None and f"at least {MIN_LABELLED}" in few.refused
    assert few.uniform_total is None and few.active_total is None
    met = plan_labels(f, _labelled(y, 300, 7), 1.0, uncertainty=u)
    assert met.refused is not None and "already" in met.refused
    pi = selection_probabilities(u, 300)
    drawn = np.random.default_rng(7).random(len(y)) < pi
    met_active = plan_labels(f, np.where(drawn, y, NAN), 1.0, probabilities=pi, uncertainty=u)
    assert met_active.refused is not None and "already" in met_active.refused


def test_a_width_no_labelling_reaches_is_said() -> None:
    y, f, u = _pool(8, size=500)
    plan = plan_labels(f, _labelled(y, 50, 8), 0.001, uncertainty=u)
    assert plan.refused is None
    assert plan.uniform_total is None and "every one of the 500" in str(plan.uniform_reason)
    assert plan.active_total is None and "every one of the 500" in str(plan.active_reason)


@pytest.mark.parametrize("width", [0.0, -1.0, math.nan])
def test_the_plan_refuses_a_width_that_is_not_positive(width: float) -> None:
    y, f, _u = _pool(9, size=100)
    with pytest.raises(ValueError, match="width"):
        plan_labels(f, _labelled(y, 20, 9), width)
