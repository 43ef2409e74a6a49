"""ragas' multi-turn samples read as conversations (--input-format ragas), with errors naming
the file, the line and the message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rageval.core.errors import InputError
from rageval.inputs import InputSpec, load_inputs

SAMPLE = {"user_input": [
    {"content": "What is the weather in Oslo?", "type": "human"},
    {"content": "", "type": "ai", "tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]},
    {"content": "rain, 12 C", "type": "tool"},
    {"content": "It rains in Oslo.", "type": "ai"},
    {"content": "And tomorrow?", "type": "human"},
    {"content": "Sun tomorrow.", "type": "ai"}],
    "reference": "Rain today, sun tomorrow.",
    "reference_tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]}


def _read(tmp_path: Path, *rows: dict) -> list:
    path = tmp_path / "ragas.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_inputs(InputSpec(str(path), kind="ragas")).records


def test_a_multi_turn_sample_is_a_conversation(tmp_path: Path) -> None:
    single = {"user_input": "Hi?", "response": "Hello.", "retrieved_contexts": ["greeting"]}
    first, second, alone = _read(tmp_path, SAMPLE, single)
    assert (first.id, second.id, alone.id) == ("1#1", "1#2", "2")
    assert (first.query, first.answer, second.query, second.answer) == (
        "What is the weather in Oslo?", "It rains in Oslo.", "And tomorrow?", "Sun tomorrow.")
    [call] = first.tool_calls
    assert (call.name, dict(call.arguments), call.result) == ("weather", {"city": "Oslo"},
                                                             "rain, 12 C")
    assert second.tool_calls == ()
    conversation = first.conversation
    assert conversation.references == ("Rain today, sun tomorrow.",)
    assert [c.name for c in conversation.reference_tool_calls] == ["weather"]
    assert [c.name for c in conversation.as_record().tool_calls] == ["weather"]


@pytest.mark.parametrize("messages, field, words", [
    ([{"content": "x", "type": "robot"}], "user_input[0].type", "one of human, ai, tool"),
    ([{"content": "x", "type": "ai"}], "user_input[0]", "before the first human message"),
    ([{"content": "q", "type": "human"}, {"content": "r", "type": "tool"}], "user_input[1]",
     "no tool call waiting"),
    (["just text"], "user_input[0]", "expected a message object"),
    ([{"content": 5, "type": "human"}], "user_input[0].content", "expected a string"),
    ([], "user_input", "without messages"),
])
def test_bad_messages_name_the_line_and_the_message(tmp_path: Path, messages, field,
                                                     words) -> None:
    with pytest.raises(InputError) as caught:
        _read(tmp_path, SAMPLE, {"user_input": messages})
    assert (caught.value.line, caught.value.field) == (2, field)
    assert words in caught.value.message
