"""The cache's JSON columns are read as ``json.loads`` reads them, by the decoder's scanner
where it reads the whole text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.judge.llm.cache.store import stored_json

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)


def _outcome(read: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", read(text)
    except ValueError as error:
        return "error", type(error)


@settings(max_examples=500, deadline=None)
@given(_VALUES, st.sampled_from(["", " ", "\n", "x", "]", "}", " 1"]),
       st.sampled_from(["", " ", "\t"]), st.booleans())
def test_a_column_reads_as_json_loads_reads_it(value: Any, after: str, before: str,
                                               compact: bool) -> None:
    text = before + json.dumps(value, separators=(",", ":") if compact else None) + after
    assert repr(_outcome(stored_json, text)) == repr(_outcome(json.loads, text))


@pytest.mark.parametrize("text", ["", "{", "nul", "[1,", '"abc', "NaN", "-Infinity"])
def test_broken_or_odd_columns_read_as_json_loads_reads_them(text: str) -> None:
    assert repr(_outcome(stored_json, text)) == repr(_outcome(json.loads, text))
