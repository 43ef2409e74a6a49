"""Conversation records: turns read from every native format into records of their own, and
bad conversation input refused with the conversation, the turn and the field named."""

from __future__ import annotations

import csv
import json

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.errors import InputError
from rageval.core.records import Conversation, load_records, records_from_dicts
from rageval.core.records.validation import conversation_object

CONVERSATION = {
    "id": "conv-7", "reference": "the refund is approved", "channel": "chat",
    "turns": [
        {"query": "Can I get a refund?", "contexts": [{"id": "d1", "text": "Refunds within 30"
                                                        " days."}],
         "answer": "Yes, within 30 days.", "reference": "Yes, within 30 days.",
         "judgments": {"d1": 2}},
        {"id": "late", "query": "It has been 40 days.", "rewritten_query": "refund after 40 "
         "days", "answer": "Let me check.",
         "tool_calls": [{"name": "order_lookup", "arguments": {"order": 17},
                         "result": {"days": 40}}],
         "reference_tool_calls": [{"name": "order_lookup", "arguments": {"order": 17}}]},
        {"query": "So?", "answer": "An exception is approved.", "claims": ["approved"]},
    ],
}


def test_turns_become_records_with_stable_ids():
    records = records_from_dicts([CONVERSATION, {"id": "single", "query": "q"}])
    assert [r.id for r in records] == ["conv-7#1", "conv-7#late", "conv-7#3", "single"]
    assert [r.turn for r in records] == [1, 2, 3, 0]
    first, second, third, single = records
    assert first.conversation is second.conversation is third.conversation
    assert single.conversation is None and single.history == ()
    assert [t.id for t in third.history] == ["conv-7#1", "conv-7#late"]
    assert second.extra == {"rewritten_query": "refund after 40 days"}
    assert third.extra == {"claims": ["approved"]}
    assert second.tool_calls[0].result == {"days": 40}
    assert second.reference_tool_calls[0].has_result is False
    conversation = first.conversation
    assert conversation.references == ("the refund is approved",)
    assert conversation.extra == {"channel": "chat"}


def test_the_conversation_round_trips():
    conversation = records_from_dicts([CONVERSATION])[0].conversation
    assert conversation.to_dict() == {**CONVERSATION, "turns": [
        {**turn, "tool_calls": [{"name": "order_lookup", "arguments": {"order": 17},
                                 "result": {"days": 40}}]} if "tool_calls" in turn else turn
        for turn in CONVERSATION["turns"]]}
    assert conversation_object(conversation.to_dict()) == conversation


def test_jsonl_json_and_parquet_read_the_same(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(json.dumps(CONVERSATION) + "\n")
    array = tmp_path / "c.json"
    array.write_text(json.dumps([CONVERSATION]))
    expected = records_from_dicts([CONVERSATION])
    assert load_records(jsonl) == expected
    assert load_records(array) == expected
    parquet = tmp_path / "c.parquet"
    turns = [{**t, "judgments": json.dumps(t["judgments"]) if "judgments" in t else None,
              "tool_calls": json.dumps(t["tool_calls"]) if "tool_calls" in t else None,
              "reference_tool_calls": json.dumps(t["reference_tool_calls"])
              if "reference_tool_calls" in t else None}
             for t in CONVERSATION["turns"]]
    pl.DataFrame([{**CONVERSATION, "turns": turns}]).write_parquet(parquet)
    assert [r.to_dict() for r in load_records(parquet)] == [r.to_dict() for r in expected]


def test_csv_reads_turns_and_tool_calls_from_json_cells(tmp_path):
    path = tmp_path / "c.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "turns", "reference", "query"])
        writer.writerow([CONVERSATION["id"], json.dumps(CONVERSATION["turns"]),
                         CONVERSATION["reference"], ""])
        writer.writerow(["alone", "", "", "hello"])
    conversation = records_from_dicts([CONVERSATION])[0].conversation
    first, *_, alone = load_records(path)
    assert first.conversation.turns == conversation.turns
    assert alone.conversation is None and alone.query == "hello"


def _refused(tmp_path, item, *lines_before) -> InputError:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in [*lines_before, item]))
    with pytest.raises(InputError) as caught:
        load_records(path)
    return caught.value


@pytest.mark.parametrize("turns, field, words", [
    ("hello", "turns", "conversation 'c': expected a list of turn objects"),
    ([], "turns", "conversation 'c': a conversation needs at least one turn"),
    ([{"query": "a"}, {"answer": "b"}], "turns[1].query",
     "conversation 'c', turn 2: missing required field 'query'"),
    (["just text"], "turns[0]", "conversation 'c', turn 1: expected a turn object"),
    ([{"query": "a", "tool_calls": [{"arguments": {}}]}], "turns[0].tool_calls[0].name",
     "conversation 'c', turn 1: missing required field 'name'"),
    ([{"query": "a", "tool_calls": [{"name": "s", "args": {}}]}], "turns[0].tool_calls[0].args",
     "did you mean 'arguments'?"),
    ([{"query": "a", "tool_calls": [{"name": "s", "arguments": "{oops"}]}],
     "turns[0].tool_calls[0].arguments", "the arguments are not valid JSON"),
    ([{"query": "a", "tool_calls": {"name": "s"}}], "turns[0].tool_calls",
     "expected a list of tool call objects"),
    ([{"query": "a", "tool_calls": [{"name": "s", "function": {"name": "s"}}]}],
     "turns[0].tool_calls[0].name", "'name' is given both here and in 'function'"),
    ([{"query": "a", "tool_calls": [{"function": "s"}]}], "turns[0].tool_calls[0].function",
     "expected an object with 'name' and 'arguments'"),
    ([{"query": "a", "tool_calls": [{"name": "s", "arguments": [1]}]}],
     "turns[0].tool_calls[0].arguments", "expected a JSON object of arguments"),
    ([{"id": "x", "query": "a"}, {"id": "x", "query": "b"}], "turns[1].id",
     "conversation 'c', turn 2: duplicate turn id 'x' (turn 1 has it)"),
    ([{"query": "a"}, {"id": 1, "query": "b"}], "turns[1].id", "duplicate turn id '1'"),
    ([{"query": "a", "contexts": [{"id": "d"}]}], "turns[0].contexts[0].text",
     "missing required field 'text'"),
    ([{"query": "a", "turns": [{"query": "b"}]}], "turns[0].turns",
     "a turn cannot hold turns of its own"),
])
def test_bad_turns_name_conversation_turn_and_field(tmp_path, turns, field, words):
    error = _refused(tmp_path, {"id": "c", "turns": turns}, {"id": "ok", "query": "q"})
    assert (error.line, error.field) == (2, field)
    assert words in error.message and str(error).startswith(f"{tmp_path / 'bad.jsonl'}, line 2")


def test_a_turn_field_on_the_conversation_is_refused(tmp_path):
    error = _refused(tmp_path, {"id": "c", "query": "q", "turns": [{"query": "a"}]})
    assert error.field == "query" and "belongs to a turn (turns[i].query)" in error.message


def test_a_conversation_used_twice_is_a_duplicate(tmp_path):
    # Its id is also its own line's in records.jsonl: no record on its own may take it.
    error = _refused(tmp_path, {"id": "c", "query": "q"}, {"id": "c", "turns": [{"query": "a"}]})
    assert "duplicate record id 'c' (first used at line 1)" in error.message
    error = _refused(tmp_path, {"id": "c", "turns": [{"query": "b"}]},
                     {"id": "c", "turns": [{"query": "a"}]})
    assert "duplicate record id 'c' (first used at line 1)" in error.message


_TEXT = st.text(min_size=1, max_size=8)
_TURN = st.fixed_dictionaries(
    {"query": _TEXT},
    optional={"answer": _TEXT, "reference": _TEXT,
              "contexts": st.lists(_TEXT, max_size=3),
              "tool_calls": st.lists(st.fixed_dictionaries(
                  {"name": _TEXT, "arguments": st.dictionaries(_TEXT, st.integers())}),
                  max_size=2)})


@settings(max_examples=150, deadline=None)
@given(st.lists(_TURN, min_size=1, max_size=5), _TEXT)
def test_any_valid_conversation_round_trips(turns, conversation_id):
    conversation = conversation_object({"id": conversation_id, "turns": turns})
    assert isinstance(conversation, Conversation)
    assert conversation_object(conversation.to_dict()) == conversation
    records = conversation.records()
    assert [r.turn for r in records] == list(range(1, len(turns) + 1))
    assert [r.query for r in records] == [t["query"] for t in turns]
