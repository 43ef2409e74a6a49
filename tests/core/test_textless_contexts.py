"""The mark of a record whose contexts carry ids but no text: only a reader of traces sets it,
a records file that names it is refused, and the reason comes from the contexts themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rageval.core.errors import InputError
from rageval.core.metric import context_text_reason
from rageval.core.records import Context, Record, load_records
from rageval.core.records.model import CONTEXTS_WITHOUT_TEXT, TraceNote

NOTE = TraceNote("gen_ai.retrieval.documents recorded ids only")
LINE = {"id": "q1", "query": "Where?", "answer": "There.",
        "contexts": [{"id": "d1", "text": "Paris is in France."}]}


def test_a_records_file_that_sets_the_mark_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(LINE | {"id": "q0"}) + "\n"
                    + json.dumps(LINE | {CONTEXTS_WITHOUT_TEXT: "my own column"}) + "\n")
    with pytest.raises(InputError, match="reserved for records read from traces") as caught:
        load_records(path)
    assert (caught.value.path, caught.value.line, caught.value.field) == (
        str(path), 2, CONTEXTS_WITHOUT_TEXT)


def test_a_csv_column_and_a_conversation_cannot_set_it_either(tmp_path: Path) -> None:
    table = tmp_path / "r.csv"
    table.write_text(f"id,query,{CONTEXTS_WITHOUT_TEXT}\nq1,Where?,x\n")
    with pytest.raises(InputError, match="reserved") as caught:
        load_records(table)
    assert (caught.value.line, caught.value.field) == (2, CONTEXTS_WITHOUT_TEXT)
    for conversation in ({"id": "c", CONTEXTS_WITHOUT_TEXT: "x", "turns": [{"query": "q"}]},
                         {"id": "c", "turns": [{"query": "q", CONTEXTS_WITHOUT_TEXT: "x"}]}):
        path = tmp_path / "c.jsonl"
        path.write_text(json.dumps(conversation) + "\n")
        with pytest.raises(InputError, match="reserved") as caught:
            load_records(path)
        assert caught.value.field.endswith(CONTEXTS_WITHOUT_TEXT)


def test_the_reason_counts_the_contexts_without_text() -> None:
    contexts = (Context("d1", "Paris."), Context("d2", ""), Context("d3", ""))
    assert context_text_reason(Record("q", contexts=contexts,
                                      extra={CONTEXTS_WITHOUT_TEXT: NOTE})) == (
        "the contexts have no text: 2 of 3 retrieved documents carry no content "
        "(gen_ai.retrieval.documents recorded ids only)")
    # the mark alone, over contexts that all have text, says nothing
    texts = (Context("d1", "Paris."),)
    assert context_text_reason(Record("q", contexts=texts,
                                      extra={CONTEXTS_WITHOUT_TEXT: NOTE})) is None
    # empty texts without the mark are texts like any other
    assert context_text_reason(Record("q", contexts=contexts)) is None
    # a record built in Python is its maker's own: the mark is read as given
    assert context_text_reason(Record("q", contexts=contexts[1:2],
                                      extra={CONTEXTS_WITHOUT_TEXT: "mine"})) == (
        "the contexts have no text: 1 of 1 retrieved documents carries no content (mine)")
