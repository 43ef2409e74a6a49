"""rageval's metric names as MLflow keys: what MLflow accepts, one name to one key."""

from __future__ import annotations

import pytest

from rageval.core.errors import UsageError
from rageval.mlflow.names import metric_key, metric_keys


@pytest.mark.parametrize(("name", "key"), [
    ("ndcg@10", "ndcg_at_10"),
    ("judge:faithfulness", "judge/faithfulness"),
    ("p(rel=2)@5", "p_rel_2_at_5"),
    ("ndcg(gain=exp)@3", "ndcg_gain_exp_at_3"),
    ("rouge2.precision", "rouge2.precision"),
    ("claims:claim_recall", "claims/claim_recall"),
    ("mrr", "mrr"),
])
def test_names_become_keys_mlflow_accepts(name: str, key: str) -> None:
    validation = pytest.importorskip("mlflow.utils.validation",
                                     reason="checked against MLflow's own validation")
    assert metric_key(name) == key
    validation._validate_metric_name(key)  # MLflow's own check: raises on a key it refuses
    assert metric_key(name).isascii() and ":" not in key  # Windows stores refuse a colon


def test_two_names_on_one_key_are_refused() -> None:
    with pytest.raises(UsageError, match="'ndcg@10' and 'ndcg_at_10' would both"):
        metric_keys(["ndcg@10", "ndcg_at_10"])
    with pytest.raises(UsageError, match=r"'a\.delta'"):  # against a's own comparison key
        metric_keys(["a", "a.delta"])
    assert metric_keys(["ndcg@10", "ndcg@10", "mrr"]) == {"ndcg@10": "ndcg_at_10",
                                                          "mrr": "mrr"}


def test_a_name_that_reads_as_a_path_is_refused() -> None:
    with pytest.raises(UsageError, match="as a path"):
        metric_key("judge::x")


def test_a_key_mlflow_would_find_too_long_is_refused() -> None:
    validation = pytest.importorskip("mlflow.utils.validation",
                                     reason="checked against MLflow's own limit")
    longest = "m" * 229
    key = metric_key(longest)
    for written in (f"{key}.calibrated_ci95_high", f"signature.{key}", f"{key}.baseline"):
        assert len(written) <= validation.MAX_ENTITY_KEY_LENGTH
    assert len(f"{key}.calibrated_ci95_high") == 250
    with pytest.raises(UsageError, match=r"its key has 230 characters.*229 at most"):
        metric_key("m" * 230)
    with pytest.raises(UsageError, match="'judge:"):
        metric_keys(["mrr", "judge:" + "x" * 229])  # 'judge/' and the name: 235
