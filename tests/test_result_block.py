"""A batch's results kept by column: the lines written are those of encoding each row on its
own, and the rows held in memory are the rows the columns describe."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.metric import MetricResult
from rageval.core.records import records_from_dicts
from rageval.core.registry import create
from rageval.engine.result_block import ResultBlock, result_block

_ROW_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_VALUE = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))
_JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), _TEXT),
                        lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=6)


@st.composite
def _blocks(draw: st.DrawFn) -> ResultBlock:
    names = draw(st.lists(_TEXT, max_size=5, unique=True))
    count = draw(st.integers(0, 6))
    ids = draw(st.lists(_TEXT.filter(bool), min_size=count, max_size=count))
    columns = [draw(st.lists(_VALUE, min_size=count, max_size=count)) for _ in names]
    maybe = st.one_of(st.none(), st.dictionaries(_TEXT, _JSONISH, max_size=2))
    errors = draw(st.lists(st.one_of(st.none(), st.dictionaries(_TEXT, _TEXT, max_size=2)),
                           min_size=count, max_size=count))
    details = draw(st.lists(maybe, min_size=count, max_size=count))
    return ResultBlock(ids, names, columns, errors, details)


def _one_by_one(block: ResultBlock) -> str:
    return "".join(_ROW_ENCODE({"id": row.id, "scores": row.scores, "details": row.details,
                                "errors": row.errors}) + "\n" for row in block.rows())


@settings(max_examples=300, deadline=None)
@given(_blocks())
def test_lines_are_those_of_each_row_encoded_alone(block: ResultBlock) -> None:
    assert block.json_lines() == _one_by_one(block)


def test_an_infinite_value_is_refused_as_the_row_encoder_refuses_it() -> None:
    block = ResultBlock(["a"], ["m"], [[float("inf")]], [None], [None])
    with pytest.raises(ValueError, match="JSON compliant"):
        block.json_lines()
    with pytest.raises(ValueError, match="JSON compliant"):
        _one_by_one(block)


def test_a_batch_block_holds_scores_errors_and_details_in_metric_order() -> None:
    records = records_from_dicts([
        {"id": "a", "answer": "the cat sat", "reference": "the cat sat down"},
        {"id": 7, "answer": "", "reference": "x"},
    ])
    first, second = create("rouge1"), create("rougeL")
    per_metric = {
        first: MetricResult({"rouge1": np.array([0.5, np.nan])}, [None, "empty answer"],
                            details=[{"k": 1}, None]),
        second: MetricResult({"rougeL": np.array([0.25, np.nan])}, [None, "empty answer"]),
    }
    rows = result_block(records, per_metric).rows()
    assert [row.id for row in rows] == ["a", "7"]
    assert rows[0].scores == {"rouge1": 0.5, "rougeL": 0.25}
    assert rows[1].scores == {"rouge1": None, "rougeL": None}
    assert rows[0].errors == {} and list(rows[1].errors) == [str(first), str(second)]
    assert rows[0].details == {first.details_key(): {"k": 1}} and rows[1].details == {}
