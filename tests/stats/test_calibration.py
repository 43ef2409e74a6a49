"""PPI and PPI++ means against ppi_py, the reference implementation (ppi-python on PyPI)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.stats.calibration import classical_mean, ppi_mean

ppi_py = pytest.importorskip("ppi_py")


def _data(seed: int, n: int, big_n: int, scale: tuple[int, int], noise: float,
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Human labels on a 1-5 (or 0-1) scale and a judge that follows them with noise."""
    rng = np.random.default_rng(seed)
    low, high = scale
    truth = rng.integers(low, high + 1, size=n + big_n).astype(float)
    judge = np.clip(np.round(truth + rng.normal(0, noise, n + big_n)), low, high)
    return truth[:n], judge[:n], judge[n:]


CASES = [(seed, n, big_n, scale, noise)
         for seed, (n, big_n) in enumerate([(10, 10), (20, 200), (50, 950), (200, 800),
                                            (30, 3000), (500, 500)])
         for scale, noise in (((1, 5), 0.8), ((1, 5), 2.5), ((0, 1), 0.4))]


@pytest.mark.parity
@pytest.mark.parametrize(("seed", "n", "big_n", "scale", "noise"), CASES)
def test_ppi_and_ppi_plus_plus_equal_ppi_py(seed: int, n: int, big_n: int,
                                            scale: tuple[int, int], noise: float) -> None:
    y, f, f_unlabelled = _data(seed, n, big_n, scale, noise)
    for lam, tuned in ((1, False), (None, True)):
        ours = ppi_mean(y, f, f_unlabelled, tuned=tuned)
        point = ppi_py.ppi_mean_pointestimate(y, f, f_unlabelled, lam=lam)
        low, high = ppi_py.ppi_mean_ci(y, f, f_unlabelled, alpha=0.05, lam=lam)
        assert ours.mean == pytest.approx(float(np.squeeze(point)), abs=1e-9)
        assert ours.ci[0] == pytest.approx(float(np.squeeze(low)), abs=1e-9)
        assert ours.ci[1] == pytest.approx(float(np.squeeze(high)), abs=1e-9)
        assert (ours.labelled, ours.unlabelled) == (n, big_n)
    mean, (low, high) = classical_mean(y)
    theirs = ppi_py.classical_mean_ci(y, alpha=0.05)
    assert (mean, low, high) == pytest.approx((y.mean(), *map(float, theirs)), abs=1e-9)


@pytest.mark.parity
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 60), st.integers(1, 300),
       st.floats(0.05, 0.95))
def test_any_data_and_level_equal_ppi_py(seed: int, n: int, big_n: int, level: float) -> None:
    y, f, f_unlabelled = _data(seed, n, big_n, (1, 5), 1.0)
    if np.var(np.concatenate([f, f_unlabelled])) == 0:
        return  # a constant judge: ppi_py divides by zero (see the next test)
    ours = ppi_mean(y, f, f_unlabelled, level=level)
    low, high = ppi_py.ppi_mean_ci(y, f, f_unlabelled, alpha=1 - level)
    assert ours.ci == pytest.approx((float(np.squeeze(low)), float(np.squeeze(high))),
                                    abs=1e-9)


def test_a_constant_judge_leaves_the_labels_alone() -> None:
    y = np.array([1.0, 2, 3, 4, 5, 3])
    ours = ppi_mean(y, np.full(6, 4.0), np.full(20, 4.0))
    assert ours.lam == 0
    mean, (low, high) = classical_mean(y)
    assert (ours.mean, *ours.ci) == pytest.approx((mean, low, high))


def test_a_perfect_judge_narrows_the_interval_to_the_judge_s() -> None:
    y, f, f_unlabelled = _data(3, 40, 4000, (1, 5), 0.0)  # the judge equals the labels
    ours = ppi_mean(y, f, f_unlabelled)
    human_low, human_high = classical_mean(y)[1]
    assert ours.width < (human_high - human_low) / 5
    assert ours.lam > 0.8  # the judge is trusted


@pytest.mark.parametrize(("args", "says"), [
    (([1.0], [1.0], [2.0]), "at least 2 labelled and 1 unlabelled"),
    (([1.0, 2.0], [1.0, 2.0], []), "at least 2 labelled and 1 unlabelled"),
    (([1.0, 2.0], [1.0], [2.0]), "aligned"),
    (([1.0, float("nan")], [1.0, 2.0], [2.0]), "finite"),
])
def test_bad_inputs_are_refused(args: tuple, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ppi_mean(*args)
