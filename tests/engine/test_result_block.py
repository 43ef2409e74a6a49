"""A batch's results kept by column: the lines written are those of encoding each record's row
on its own, and the rows are those the row-by-row builder made before blocks existed."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.metric import Metric, MetricResult
from rageval.core.records import Record, records_from_dicts
from rageval.core.registry import create
from rageval.core.results import RecordResult
from rageval.engine.result_block import ResultBlock, result_block

_ROW_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_FLOAT = st.floats(allow_nan=False, allow_infinity=False)
_VALUE = st.one_of(st.none(), _FLOAT)
_JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), _FLOAT, _TEXT),
                        lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=6)


@st.composite
def _blocks(draw: st.DrawFn) -> ResultBlock:
    names = draw(st.lists(st.one_of(_TEXT, st.sampled_from(["m", "%s", '"q"'])), max_size=5))
    count = draw(st.integers(0, 6))
    ids = draw(st.lists(_TEXT.filter(bool), min_size=count, max_size=count))
    columns = [draw(st.lists(_VALUE, min_size=count, max_size=count)) for _ in names]
    maybe = st.one_of(st.none(), st.dictionaries(_TEXT, _JSONISH, max_size=2))
    errors = draw(st.lists(st.one_of(st.none(), st.dictionaries(_TEXT, _TEXT, max_size=2)),
                           min_size=count, max_size=count))
    details = draw(st.lists(maybe, min_size=count, max_size=count))
    return ResultBlock(ids, names, columns, errors, details)


def _each_row_encoded(block: ResultBlock) -> str:
    """Straight from the block's fields: a dict per record, encoded on its own."""
    lines = []
    for i, rid in enumerate(block.ids):
        scores = dict(zip(block.names, (column[i] for column in block.columns), strict=True))
        row = {"id": rid, "scores": scores, "details": block.details[i] or {},
               "errors": block.errors[i] or {}}
        lines.append(_ROW_ENCODE(row) + "\n")
    return "".join(lines)


@settings(max_examples=300, deadline=None)
@given(_blocks())
def test_lines_are_those_of_each_row_encoded_alone(block: ResultBlock) -> None:
    assert block.json_lines() == _each_row_encoded(block)


def test_an_infinite_value_is_refused_as_the_row_encoder_refuses_it() -> None:
    block = ResultBlock(["a"], ["m"], [[float("inf")]], [None], [None])
    with pytest.raises(ValueError, match="JSON compliant"):
        block.json_lines()
    with pytest.raises(ValueError, match="JSON compliant"):
        _each_row_encoded(block)


def test_a_column_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError, match="one value per record"):
        ResultBlock(["a"], ["m"], [[]], [None], [None]).json_lines()


# ---- the rows, against the builder blocks replaced ------------------------------------------


def _rows_one_by_one(records: list[Record],
                     per_metric: dict[Metric, MetricResult]) -> list[RecordResult]:
    """The per-record rows as they were built before blocks: a record at a time."""
    names = [name for result in per_metric.values() for name in result.values]
    columns = []
    for result in per_metric.values():
        for values in result.values.values():
            floats = values.astype(np.float64).tolist()
            columns.append([None if v != v else v for v in floats])
    rows = []
    for i, record in enumerate(records):
        errors = {str(metric): result.reasons[i] for metric, result in per_metric.items()
                  if result.reasons[i] is not None}
        details: dict[str, Any] = {}
        for metric, result in per_metric.items():
            if result.details is not None and result.details[i] is not None:
                details.setdefault(metric.details_key(), result.details[i])
        scores = dict(zip(names, (column[i] for column in columns), strict=True))
        rows.append(RecordResult(record.id, scores, errors, details))
    return rows


class _SharedDetails(Metric):
    """Two outputs, and details under a key another metric also uses."""

    family = "toy"
    base = "shared"
    summary = "details under a key another metric shares"

    def score(self, batch: Any) -> MetricResult:
        raise NotImplementedError  # only its identity and details key are used here

    def details_key(self) -> str:
        return "analysis"


class _OtherSharedDetails(_SharedDetails):
    base = "shared2"


_METRICS = [create("rouge1"), create("rougeL"), _SharedDetails(), _OtherSharedDetails()]
# Finite in float32 too (an infinite value is refused by either encoding: tested above).
_CELL = st.one_of(st.just(float("nan")), st.just(-0.0), st.floats(-1e30, 1e30))


@st.composite
def _scored_batch(draw: st.DrawFn) -> tuple[list[Record], dict[Metric, MetricResult]]:
    count = draw(st.integers(0, 5))
    ids = draw(st.lists(_TEXT.filter(bool), min_size=count, max_size=count, unique=True))
    records = records_from_dicts([{"id": rid} for rid in ids]) if ids else []
    per_metric = {}
    for metric in draw(st.lists(st.sampled_from(_METRICS), unique=True, max_size=4)):
        outputs = [str(metric.name)] + (["%s.part"] if draw(st.booleans()) else [])
        dtype = draw(st.sampled_from([np.float64, np.float32]))
        values = {name: np.array(draw(st.lists(_CELL, min_size=count, max_size=count)),
                                 dtype=dtype) for name in outputs}
        reasons = draw(st.lists(st.one_of(st.none(), _TEXT), min_size=count, max_size=count))
        details = draw(st.one_of(st.none(), st.lists(
            st.one_of(st.none(), st.dictionaries(_TEXT, _FLOAT, max_size=2)),
            min_size=count, max_size=count)))
        per_metric[metric] = MetricResult(values, reasons, details)
    return records, per_metric


@settings(max_examples=200, deadline=None)
@given(_scored_batch())
def test_rows_are_those_built_record_by_record(
        batch: tuple[list[Record], dict[Metric, MetricResult]]) -> None:
    records, per_metric = batch
    block = result_block(records, per_metric)
    expected = _rows_one_by_one(records, per_metric)
    assert block.rows() == expected
    assert block.json_lines() == "".join(
        _ROW_ENCODE({"id": r.id, "scores": r.scores, "details": r.details,
                     "errors": r.errors}) + "\n" for r in expected)


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
