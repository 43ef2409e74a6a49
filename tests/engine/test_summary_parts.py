"""The summary's compact storage: equal outputs share one column, batches are joined into large
chunks as they come, and every mean's CI comes from one set of draws, exactly as one by one."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.metric import MetricResult
from rageval.core.registry import create
from rageval.stats import resampling as stats
from rageval.stats.resampling import bootstrap_ci, bootstrap_mean_cis
from rageval.summary import MetricStore, SummaryParts, summarise
from rageval.summary.columns import GrowingColumn

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


def test_equal_outputs_share_one_column_until_a_batch_tells_them_apart() -> None:
    nan = np.nan
    store = MetricStore()
    store.add(MetricResult({"a": np.array([1.0, nan]), "b": np.array([1.0, nan]),
                            "c": np.array([2.0, nan]), "d": np.array([1.0, nan])}, []))
    store.add(MetricResult({"a": np.array([3.0]), "b": np.array([3.0]), "c": np.array([4.0]),
                            "d": np.array([5.0])}, []))
    result = store.result()
    assert list(result.values) == ["a", "b", "c", "d"]
    assert result.values["a"] is result.values["b"]
    assert result.values["d"] is not result.values["a"]
    np.testing.assert_array_equal(result.values["d"], [1.0, nan, 5.0])
    np.testing.assert_array_equal(result.values["a"], [1.0, nan, 3.0])
    np.testing.assert_array_equal(result.values["c"], [2.0, nan, 4.0])


def test_stats_and_details_are_joined_in_order() -> None:
    store = MetricStore()
    shared = {"endpoint": "e"}
    store.add(MetricResult({"m": np.zeros(2)}, [], None, np.array([[1, 2], [3, 4]], np.int32)))
    store.add(MetricResult({"m": np.ones(1)}, [], [shared], np.array([[5, 6]], np.int32)))
    result = store.result()
    assert result.details == [None, None, shared]
    assert result.stats is not None and result.stats.tolist() == [[1, 2], [3, 4], [5, 6]]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=8), st.integers(1, 64))
def test_growing_columns_keep_every_row(batches: list[int], chunk_bytes: int) -> None:
    rng = np.random.default_rng(len(batches))
    arrays = [rng.random((n, 3)) for n in batches]
    column = GrowingColumn(np.float64, 3, chunk_bytes=chunk_bytes)
    for array in arrays:
        column.append(array)
    np.testing.assert_array_equal(column.copy().array(), np.concatenate(arrays))
    np.testing.assert_array_equal(column.array(), np.concatenate(arrays))
    assert len(column.array()) == 0


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
    store = MetricStore()
    for batch in batches:
        store.add(batch)
    alone = summarise(metric, store.result(), Counter({"empty answer": 3}), 3, 200)
    assert together == alone


def test_arrays_of_other_dtypes_keep_their_own_cis() -> None:
    values = np.random.default_rng(2).random(50)
    arrays = [values.astype(np.float32), values]
    expected = [bootstrap_ci(a, resamples=100, seed=1) for a in arrays]
    assert bootstrap_mean_cis(arrays, resamples=100, seed=1) == expected


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 5), st.integers(1, 120), st.integers(0, 2**16),
       st.integers(1, 64), st.integers(1, 500))
def test_resampled_means_in_pieces_and_threads_are_those_of_one_gather(
        n: int, columns: int, resamples: int, seed: int, gather: int, block: int) -> None:
    """Means are gathered a few rows at a time, split between threads and drawn in blocks:
    each value equals the mean of the row from one whole gather of the draws."""
    rng = np.random.default_rng(seed)
    arrays = [rng.random(n) for _ in range(columns)]
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    expected = np.stack([a[draws].mean(axis=1) for a in arrays])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stats, "_GATHER_CELLS", gather)
        patch.setattr(stats, "_THREADED_CELLS", 0)
        patch.setattr(stats, "_usable_cpus", lambda: 2)  # threads even on a 1-CPU machine
        patch.setattr(stats, "_BLOCK_CELLS", max(n, block))
        got = stats._resampled_means(arrays, n, resamples, seed)
    assert np.array_equal(got, expected)
