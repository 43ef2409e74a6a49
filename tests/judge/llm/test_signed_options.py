"""The judge options declared as signed (``Signed`` on their ``JudgeConfig`` field) enter the
signatures of the judge metrics that use them, written as their declaration says; the options
not declared signed (how the judge is reached, paced and paid for) enter none."""

from __future__ import annotations

from typing import Any

import pytest

from rageval.core.metric import ScoreOptions
from rageval.core.registry import create
from rageval.judge.llm.config import SIGNED
from rageval.judge.llm.options import JudgeOptions

METRICS = ("judge:faithfulness", "claims:f1")

# A value other than the default for every signed option, and what a signature then shows.
SIGNED_VALUES: dict[str, tuple[Any, str]] = {
    "model": ("other-model", "judge:other-model"),
    "base_url": ("http://127.0.0.1:9/v1", "endpoint:http://127.0.0.1:9/v1"),
    "response_format": ("text", "response_format:text"),
    "max_tokens": (64, "max_tokens:64"),
    "reasoning_effort": ("high", "reasoning_effort:high"),
    "history_chars": (100, "history_chars:100"),
    "extra": ({"top_k": 1}, "extra:top_k=1"),
    "temperature": (0.5, "temperature:0.5"),
    "seed": (7, "seed:7"),
    "samples": (3, "samples:3"),
    "logprobs": (True, "score:logprobs"),
}

UNSIGNED_VALUES: dict[str, Any] = {
    "api_key_env": "OTHER_KEY", "concurrency": 2, "rpm": 30.0, "timeout": 5.0,
    "first_reply_timeout": 9.0, "max_retries": 1, "cache": "other.sqlite", "offline": True,
    "refresh": True, "price_in": 1.0, "price_out": 2.0, "max_requests": 10, "max_cost": 1.0,
    "any_served_model": True, "price_cached_in": 0.5,
    # Batch judging fetches the same replies by another road (same cache keys).
    "batch": True, "batch_poll": 5.0, "batch_discount": 0.25, "batch_cancel": True,
    "batch_file": "batch.jsonl",
}


def _signatures(**changed: Any) -> dict[str, str]:
    judge = JudgeOptions(**{"model": "m", **changed})
    return {name: create(name, ScoreOptions(judge=judge)).signature().format()
            for name in METRICS}


def test_every_signed_option_is_listed_here() -> None:
    assert set(SIGNED) == set(SIGNED_VALUES)


@pytest.mark.parametrize("name", sorted(SIGNED_VALUES))
def test_a_signed_option_enters_a_judge_metric_signature(name: str) -> None:
    value, shown = SIGNED_VALUES[name]
    plain, changed = _signatures(), _signatures(**{name: value})
    assert changed != plain
    assert any(f"|{shown}|" in signature for signature in changed.values()), changed


def test_an_unsigned_option_enters_no_signature() -> None:
    plain = _signatures()
    for name, value in UNSIGNED_VALUES.items():
        assert _signatures(**{name: value}) == plain, name
