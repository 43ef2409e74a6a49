"""The documents of a retriever span read from its flat attributes: in the order of their
index, whatever order the attributes come in, and indices written oddly read as numbers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rageval.inputs.traces.spans import Span, document_values, documents


def _span(attributes: dict[str, Any]) -> Span:
    return Span("0" * 32, "1" * 16, None, "retrieve", "RETRIEVER", 0, 1, attributes)


def test_documents_come_in_index_order_with_gaps() -> None:
    span = _span({"retrieval.documents.10.document.id": "k",
                  "retrieval.documents.2.document.id": "c",
                  "retrieval.documents.2.document.content": "C",
                  "retrieval.documents.0.document.id": "a",
                  "retrieval.documents.x.document.id": "not an index",
                  "retrieval.documents.3.other": "not a document field",
                  "input.value": "q"})
    assert documents(span) == [{"id": "a"}, {"id": "c", "content": "C"}, {"id": "k"}]


def test_indices_that_are_the_same_number_are_one_document() -> None:
    span = _span({"retrieval.documents.01.document.content": "z",
                  "retrieval.documents.1.document.id": "a",
                  "retrieval.documents.01.document.id": "b",
                  "retrieval.documents.0.document.id": "first"})
    # read in attribute order: the last value of a field stands
    assert documents(span) == [{"id": "first"}, {"content": "z", "id": "b"}]


def test_a_span_without_documents_has_none() -> None:
    assert documents(_span({"input.value": "q"})) == []
    assert documents(_span({"retrieval.documents.0.document.id": "only"})) == [{"id": "only"}]


@pytest.mark.parametrize("attributes", [
    {"retrieval.documents.10.document.id": "k", "retrieval.documents.2.document.id": "c",
     "retrieval.documents.2.document.content": "C", "retrieval.documents.0.document.score": 1.5,
     "retrieval.documents.3.other": "not a document field", "input.value": "q"},
    {"retrieval.documents.0.document.metadata": "{}",  # a document with none of the fields
     "retrieval.documents.1.document.id": "b", "retrieval.documents.1.document.id2": "x"},
    {"retrieval.documents.01.document.content": "z", "retrieval.documents.1.document.id": "a",
     "retrieval.documents.01.document.id": "b", "retrieval.documents.0.document.id": "first"},
    {"retrieval.documents.x.document.id": "not an index", "retrieval.documents.0.document.id": "a"},
    {"retrieval.documents": [{"document": {"id": "l1", "content": "one"}}, {"id": "l2"}, 5]},
    {"input.value": "q"},
])
def test_document_values_are_the_documents_fields_in_order(attributes: dict[str, Any]) -> None:
    names = ("id", "content", "score")
    for _ in range(2):  # the keys parsed, then looked up
        assert document_values(_span(attributes), names) == [
            [fields.get(name) for name in names] for fields in documents(_span(attributes))]


_KEYS = ["retrieval.documents.0.document.id", "retrieval.documents.0.document.content",
         "retrieval.documents.1.document.score", "retrieval.documents.1.document.id",
         "retrieval.documents.01.document.id", "retrieval.documents.12.document.content",
         "retrieval.documents.2.document.metadata", "retrieval.documents", "input.value",
         "retrieval.documents.x.document.id"]


@given(st.lists(st.tuples(st.sampled_from(_KEYS), st.integers(0, 3)), max_size=8),
       st.sampled_from([("id", "content", "score"), ("content", "id"), ("id",)]))
def test_document_values_of_spans_sharing_a_layout_are_each_their_own(
        pairs: list[tuple[str, int]], names: tuple[str, ...]) -> None:
    layout = dict(pairs)
    for offset in (0, 10):  # the same keys in the same order, other values
        attributes = {key: f"v{value + offset}" for key, value in layout.items()}
        assert document_values(_span(attributes), names) == [
            [fields.get(name) for name in names] for fields in documents(_span(attributes))]


def test_spans_whose_keys_keep_changing_are_read_right_and_kept_few() -> None:
    """Each span a layout of its own (a key that varies): past the few layouts kept, the
    documents are read value by value, with the same values, and no layout more is held."""
    from rageval.inputs.traces import spans as spans_module

    names = ("id", "content", "score")
    for n in range(spans_module._LAYOUTS_KEPT + 50):
        attributes = {f"metadata.request_{n}": "x",
                      "retrieval.documents.0.document.id": f"a{n}",
                      "retrieval.documents.1.document.id": f"b{n}",
                      "retrieval.documents.1.document.score": float(n)}
        assert document_values(_span(attributes), names) == [
            [f"a{n}", None, None], [f"b{n}", None, float(n)]]
    held = spans_module._LAYOUTS[("retrieval.documents.", names)]
    assert len(held) <= spans_module._LAYOUTS_KEPT
