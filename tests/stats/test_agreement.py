"""Krippendorff's alpha against the krippendorff package, the reference implementation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.stats.agreement import krippendorff_alpha

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
