"""Tests for rageval.inputs: the spec, field maps, and the package's import cost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rageval.core.errors import UsageError
from rageval.inputs import INPUT_KINDS, MAP_FIELDS, InputSpec, load_inputs, parse_field_map


@given(st.lists(st.tuples(st.sampled_from(MAP_FIELDS),
                          st.text(min_size=1).filter(lambda s: s.strip())),
                unique_by=lambda pair: pair[0]))
def test_parse_field_map_round_trips(pairs: list[tuple[str, str]]) -> None:
    assert parse_field_map(f"{field}={column}" for field, column in pairs) == tuple(pairs)


@pytest.mark.parametrize(("item", "says"), [
    ("query", "expected FIELD=COLUMN"),
    ("=question", "the field is empty"),
    ("query=", "the column is empty"),
    ("query= ", "the column is empty"),
    ("qeury=question", "unknown field 'qeury' (did you mean 'query'?)"),
])
def test_parse_field_map_errors(item: str, says: str) -> None:
    with pytest.raises(UsageError, match=r"--map item") as caught:
        parse_field_map([item])
    assert says in str(caught.value)


def test_parse_field_map_twice() -> None:
    with pytest.raises(UsageError, match="mapped twice"):
        parse_field_map(["query=a", "answer=b", " query=c"])
    assert parse_field_map([" query =a b"]) == (("query", "a b"),)


def test_describe_holds_paths_kind_and_map_only() -> None:
    spec = InputSpec(records="r.jsonl", kind="ragas", field_map=(("query", "q"),),
                     format="jsonl", max_line_bytes=10)
    assert spec.describe() == {"records": "r.jsonl", "kind": "ragas", "map": {"query": "q"}}
    json.dumps(spec.describe())


@pytest.mark.parametrize(("spec", "says"), [
    (InputSpec(records="r.jsonl", kind="llamaindex"), "unknown input kind"),
    (InputSpec(records="r.jsonl", format="xml"), "unknown input format"),
    (InputSpec(), "nothing to read"),
    (InputSpec(records="r.jsonl", queries="q.tsv"), "queries applies to a run"),
    (InputSpec(records="r.jsonl", depth=3), "depth applies to a run"),
    (InputSpec(records="r.jsonl", kind="ragas", corpus="c.jsonl"), "a corpus applies"),
    (InputSpec(records="r.jsonl", field_map=(("quey", "q"),)), "unknown field"),
    (InputSpec(records="r.jsonl", max_line_bytes=0), "max_line_bytes"),
])
def test_spec_usage_errors(spec: InputSpec, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        load_inputs(spec)


def test_import_is_cheap() -> None:
    code = ("import sys, rageval.inputs as i; assert 'polars' not in sys.modules; "
            "assert i.INPUT_KINDS == ('records', 'ragas', 'trec-rag', 'openinference', "
            "'otel-genai')")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert INPUT_KINDS == ("records", "ragas", "trec-rag", "openinference", "otel-genai")
