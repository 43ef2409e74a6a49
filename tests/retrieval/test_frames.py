"""Results as DataFrames (pandas and polars) and the public API of `import rageval`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import polars as pl

import rageval
from rageval.core.records import Context, Record

RECORDS = [
    Record(id="a", query="q", contexts=(Context("d1", "x y"), Context("d2", "z")),
           answer="x y z", references=("x y",), judgments={"d1": 1}),
    Record(id="b", query="q", contexts=(Context("d3", "w"),), answer="w",
           references=("v",), judgments={"d9": 1}),
    Record(id="c", query="q", contexts=(Context("d4", "w"),), answer="w",
           references=("w",), judgments={}),
]


def _results() -> rageval.Results:
    return rageval.evaluate(RECORDS, ["mrr", "rouge1"], bootstrap=20)


def test_to_polars_one_row_per_record_one_column_per_metric() -> None:
    frame = _results().to_polars()
    assert isinstance(frame, pl.DataFrame)
    assert frame["id"].to_list() == ["a", "b", "c"]
    assert frame.columns[:3] == ["id", "mrr", "rouge1"]
    assert frame["mrr"].to_list() == [1.0, 0.0, None]  # c: no relevant judgment -> unscored
    assert frame.schema["rouge1"] == pl.Float64


def test_to_pandas_nan_where_unscored() -> None:
    frame = _results().to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["id"]) == ["a", "b", "c"]
    assert math.isnan(frame.loc[2, "mrr"]) and frame.loc[0, "mrr"] == 1.0


def test_details_columns() -> None:
    results = _results()
    with_details = results.to_pandas(details=True)
    assert with_details.loc[2, "errors"]["mrr"].startswith("undefined")
    assert with_details.loc[0, "errors"] == {}
    polars_frame = results.to_polars(details=True)
    assert json.loads(polars_frame["errors"][2])["mrr"].startswith("undefined")
    assert "details" in polars_frame.columns and "details" not in results.to_polars().columns


def test_frames_agree_with_the_records() -> None:
    results = _results()
    frame = results.to_polars()
    for row, record in zip(frame.iter_rows(named=True), results.records, strict=True):
        for name, value in record.scores.items():
            got = row[name]
            assert got == value if got is not None else value is None or math.isnan(value)


def test_dir_shows_the_public_api() -> None:
    names = dir(rageval)
    for name in ("evaluate", "load_records", "Results", "compare_runs", "Record", "Context",
                 "JudgeOptions", "read_eval_file", "__version__"):
        assert name in names, name
        assert getattr(rageval, name) is not None


def test_import_is_cheap() -> None:
    """`import rageval` loads none of the heavy libraries."""
    code = ("import sys, rageval; heavy = [m for m in ('polars', 'numpy', 'torch', 'openai', "
            "'rich', 'pandas', 'transformers') if m in sys.modules]; print(','.join(heavy))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, cwd=Path(__file__).parents[1]).stdout.strip()
    assert found == ""


def test_all_lists_every_lazy_name() -> None:
    assert sorted(rageval.__all__) == sorted([*rageval._PUBLIC, "__version__"])
