"""The summary's compact storage: equal outputs share one array, parts are released as they
are joined, and every mean's CI comes from one set of draws, exactly as one by one."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.compare.stats import bootstrap_ci, bootstrap_mean_cis
from rageval.core.metric import MetricResult
from rageval.core.registry import create
from rageval.engine.summary import SummaryParts, _shared_outputs, concat, summarise

_FLOATS = st.floats(0, 1, allow_nan=False, width=64)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_FLOATS, max_size=30), max_size=6), st.integers(0, 2**16),
       st.integers(1, 300))
def test_shared_draws_give_the_cis_of_one_by_one(arrays: list[list[float]], seed: int,
                                                   resamples: int) -> None:
    values = [np.array(a, dtype=np.float64) for a in arrays]
    values += values[:2]  # equal arrays are resampled once
    expected = [bootstrap_ci(v, resamples=resamples, seed=seed) for v in values]
    assert bootstrap_mean_cis(values, resamples=resamples, seed=seed) == expected


def test_shared_draws_check_their_arguments() -> None:
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_mean_cis([np.ones(3)], resamples=0)
    assert bootstrap_mean_cis([np.empty(0)], resamples=0) == [None]


def test_equal_outputs_share_one_array() -> None:
    nan = np.nan
    values = {"a": np.array([1.0, nan]), "b": np.array([1.0, nan]), "c": np.array([2.0, nan]),
              "d": np.array([1, 0])}
    shared = _shared_outputs(values)
    assert shared["a"] is shared["b"]
    assert shared["c"] is values["c"] and shared["d"] is values["d"]


def _parts(batches: int) -> list[MetricResult]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(batches):
        head = rng.random(4)
        values = _shared_outputs({"m": head, "m.f": head.copy(), "m.p": rng.random(4)})
        out.append(MetricResult(values, [None] * 4))
    return out


def test_release_empties_the_parts_and_keeps_the_values() -> None:
    kept, released = _parts(3), _parts(3)
    whole = concat(kept)
    joined = concat(released, release=True)
    assert all(not p.values for p in released)
    for name in ("m", "m.f", "m.p"):
        np.testing.assert_array_equal(joined.values[name], whole.values[name])
    assert joined.values["m"] is joined.values["m.f"]
    assert list(joined.values) == ["m", "m.f", "m.p"]


def test_the_run_summary_equals_each_metric_summarised_alone() -> None:
    metric = create("rouge1")
    names = metric.output_names()
    rng = np.random.default_rng(1)
    parts = SummaryParts([metric])
    batches = []
    for _ in range(3):
        values = {n: rng.random(5) for n in names}
        values[names[0]] = values[f"{names[0]}.fmeasure"].copy()
        values[names[0]][0] = np.nan
        values[f"{names[0]}.fmeasure"][0] = np.nan
        batch = MetricResult(values, ["empty answer", None, None, None, None])
        batches.append(MetricResult({n: v.copy() for n, v in values.items()}, batch.reasons))
        parts.add_part(metric, batch, batch.reasons)
    together = parts.summarise([metric], seed=3, bootstrap=200)
    alone = summarise(metric, concat(batches), Counter({"empty answer": 3}), 3, 200)
    assert together == alone
