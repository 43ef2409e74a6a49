"""Krippendorff's alpha against the krippendorff package, the reference implementation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.stats.agreement import annotator_agreement, krippendorff_alpha, quadratic_kappa

krippendorff = pytest.importorskip("krippendorff")

# Krippendorff's own worked example (4 coders, 12 units, missing values).
EXAMPLE = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
    [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
])


@pytest.mark.parity
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_the_worked_example(level: str) -> None:
    ours = krippendorff_alpha(EXAMPLE, level)
    assert ours == pytest.approx(krippendorff.alpha(reliability_data=EXAMPLE,
                                                     level_of_measurement=level), abs=1e-12)


@pytest.mark.parity
@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 5), st.integers(2, 40),
       st.sampled_from([(1, 5), (0, 3), (0, 1)]), st.floats(0, 0.4),
       st.sampled_from(["nominal", "ordinal", "interval"]))
def test_random_panels(seed: int, raters: int, items: int, scale: tuple[int, int],
                       missing: float, level: str) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.integers(scale[0], scale[1] + 1, items)
    data = np.clip(truth + rng.integers(-1, 2, (raters, items)), *scale).astype(float)
    data[rng.random((raters, items)) < missing] = np.nan
    pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    if len(np.unique(pairable[~np.isnan(pairable)])) < 2:
        assert krippendorff_alpha(data, level) is None  # undefined: the package divides by 0
        return
    assert krippendorff_alpha(data, level) == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement=level), abs=1e-9)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="level must be one of"):
        krippendorff_alpha(EXAMPLE, "ratio")
    with pytest.raises(ValueError, match="raters x items"):
        krippendorff_alpha(np.array([1.0, 2.0]))


def test_annotator_agreement_needs_two_annotators_on_two_common_records() -> None:
    assert annotator_agreement({"ana": {"q1": 3, "q2": 4}}, (1, 5)) is None
    assert annotator_agreement({"ana": {"q1": 3, "q2": 4}, "bo": {"q1": 3, "q3": 5}},
                               (1, 5)) is None  # one record in common
    two = annotator_agreement({"ana": {"q1": 3, "q2": 4, "q3": 1},
                               "bo": {"q1": 3, "q2": 5, "q4": 2}}, (1, 5))
    assert two is not None and two["records"] == 2
    assert two["cohen_kappa_quadratic"] == quadratic_kappa([3, 4], [3, 5], (1, 5))
    assert two["krippendorff_alpha"] == krippendorff_alpha(
        np.array([[3, 4, 1, np.nan], [3, 5, np.nan, 2]]), "interval")
    three = annotator_agreement({"ana": {"q1": 3, "q2": 4}, "bo": {"q1": 3, "q2": 5},
                                 "cy": {"q1": 2}}, (1, 5))
    assert three is not None and "cohen_kappa_quadratic" not in three  # kappa is for two
    halves = annotator_agreement({"ana": {"q1": 0.5, "q2": 1.0}, "bo": {"q1": 0.5, "q2": 0.0}},
                                 (0, 1.5))
    assert halves is not None and halves["cohen_kappa_quadratic"] is None  # not an integer scale
