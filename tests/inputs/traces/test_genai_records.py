"""Records from OTLP/JSON traces by the OpenTelemetry GenAI conventions (``--input-format
otel-genai``): every rule of the mapping, the older attribute forms, structured and JSON-text
messages, units, sessions, maps, references, and malformed attributes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from genai_spans import GenaiSpan, messages, rag_trace, span_id, trace_id, write
from hypothesis import given
from hypothesis import strategies as st

from rageval.core.errors import InputError, UsageError
from rageval.core.metric import CONTEXTS_WITHOUT_TEXT, context_text_reason
from rageval.inputs import InputSpec, load_inputs
from rageval.inputs.traces.genai import MessagesError, message_texts

DOCS = [{"id": "d1", "score": 0.9, "content": "Paris is in France."},
        {"id": "d2", "score": 0.4, "content": "Oslo is in Norway."}]


def spec(path: Path, **more: Any) -> InputSpec:
    return InputSpec(records=str(path), kind="otel-genai", **more)


def records(path: Path, **more: Any) -> list[Any]:
    return load_inputs(spec(path, **more)).records


@pytest.mark.parametrize("as_json", [True, False])
def test_a_trace_gives_query_contexts_answer_and_tool_calls(tmp_path: Path,
                                                          as_json: bool) -> None:
    tools = [{"gen_ai.tool.name": "search", "gen_ai.tool.call.id": "c1",
              "gen_ai.tool.call.arguments": json.dumps({"q": "Paris"}),
              "gen_ai.tool.call.result": json.dumps({"hits": 2})},
             {"gen_ai.tool.name": "clock", "gen_ai.tool.call.result": "noon"}]
    path = write(tmp_path / "s.jsonl", rag_trace("t1", "Where is Paris?", DOCS, "In France.",
                                                 as_json=as_json, tools=tools), per_line=2)
    (record,) = records(path)
    assert record.id == trace_id("t1")
    assert record.query == "Where is Paris?"  # the last user message, not the system one
    assert record.answer == "In France."
    assert [(c.id, c.text, c.score) for c in record.contexts] == [
        ("d1", "Paris is in France.", 0.9), ("d2", "Oslo is in Norway.", 0.4)]
    assert [(c.name, dict(c.arguments), c.result) for c in record.tool_calls] == [
        ("search", {"q": "Paris"}, {"hits": 2}), ("clock", {}, "noon")]
    assert record.extra == {"trace_id": trace_id("t1"), "span_id": span_id("t1-root")}
    assert context_text_reason(record) is None


def test_the_root_spans_own_messages_come_first_then_the_retrieval_query(
        tmp_path: Path) -> None:
    spans = rag_trace("t1", "inner?", DOCS, "A.")
    spans[0].attributes["gen_ai.input.messages"] = messages(("user", "outer?"))
    no_chat = [s for s in rag_trace("t2", "searched?", DOCS, "A.", t0=500)
               if s.attributes["gen_ai.operation.name"] != "chat"]
    first, second = records(write(tmp_path / "s.jsonl", spans + no_chat))
    assert first.query == "outer?"
    assert second.query == "searched?" and second.answer is None


def test_text_parts_join_and_other_parts_are_not_text() -> None:
    value = [{"role": "user", "parts": [{"type": "text", "content": "a"},
                                        {"type": "image", "uri": "x"},
                                        {"type": "text", "content": "b"}]},
             {"role": "assistant", "parts": [{"type": "tool_call", "name": "f",
                                              "arguments": {}}]}]
    assert message_texts(value) == [("user", "a\nb"), ("assistant", None)]
    assert message_texts(json.dumps(value)) == message_texts(value)


def test_the_answer_is_the_last_inference_span_to_end(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "final")
    early = GenaiSpan("t1", "t1-plan", "t1-root", "chat plan", 12, 15, {
        "gen_ai.operation.name": "text_completion",
        "gen_ai.output.messages": messages(("assistant", "plan"))})
    (record,) = records(write(tmp_path / "s.jsonl", [*spans, early]))
    assert record.answer == "final"


@pytest.mark.parametrize("attributes", [
    {"gen_ai.prompt": json.dumps([{"role": "system", "content": "be brief"},
                                  {"role": "user", "content": "old?"}]),
     "gen_ai.completion": json.dumps([{"role": "assistant", "content": "old."}])},
    {"gen_ai.prompt": "old?", "gen_ai.completion": "old."},
    {"gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "be brief",
     "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "old?",
     "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "old."},
])
def test_the_older_prompt_and_completion_forms(tmp_path: Path,
                                               attributes: dict[str, Any]) -> None:
    chat = GenaiSpan("t1", "c", None, "chat", 0, 5,
                     {"gen_ai.operation.name": "chat", **attributes})
    (record,) = records(write(tmp_path / "s.jsonl", [chat]))
    assert (record.query, record.answer) == ("old?", "old.")


def test_documents_ids_repeats_and_scores_as_openinference(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q?", [{"content": "no id", "score": 2}, DOCS[0]], "A.")
    spans.insert(2, GenaiSpan("t1", "t1-ret2", "t1-root", "retrieval", 5, 9, {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.documents": json.dumps([DOCS[1], DOCS[0], {
            "id": "d9", "score": "high", "content": "x"}])}))
    (record,) = records(write(tmp_path / "s.jsonl", spans))
    assert [(c.id, c.score) for c in record.contexts] == [
        ("1", 2.0), ("d1", 0.9), ("d2", 0.4), ("d9", None)]


def test_one_id_with_two_texts_is_an_error_naming_the_attribute(tmp_path: Path) -> None:
    docs = [DOCS[0], {**DOCS[0], "content": "other"}]
    path = write(tmp_path / "s.jsonl", rag_trace("t1", "Q?", docs, "A."))
    with pytest.raises(InputError, match=r"gen_ai\.retrieval\.documents\.1") as caught:
        records(path)
    assert caught.value.line == 1 and "two different texts" in caught.value.message


def test_documents_without_content_keep_their_ids_and_say_why(tmp_path: Path) -> None:
    docs = [{"id": "d1", "score": 0.9}, {"id": "d2", "score": 0.4}]
    (record,) = records(write(tmp_path / "s.jsonl", rag_trace("t1", "Q?", docs, "A.")))
    assert [c.id for c in record.contexts] == ["d1", "d2"]
    assert record.extra[CONTEXTS_WITHOUT_TEXT] == "gen_ai.retrieval.documents recorded ids only"
    assert context_text_reason(record) == (
        "the contexts have no text: 2 of 2 retrieved documents carry no content "
        "(gen_ai.retrieval.documents recorded ids only)")


@pytest.mark.parametrize("name", ["gen_ai.input.messages", "gen_ai.output.messages",
                                  "gen_ai.retrieval.documents"])
def test_bad_json_is_an_error_naming_file_line_trace_and_attribute(tmp_path: Path,
                                                                   name: str) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "A.")
    spans += rag_trace("t2", "Q?", DOCS, "A.", t0=500)
    target = next(s for s in spans[4:] if name in s.attributes)
    target.attributes[name] = '[{"role": "user", '
    path = write(tmp_path / "s.jsonl", spans, per_line=4)
    with pytest.raises(InputError) as caught:
        records(path)
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), 2, name)
    assert f"trace {trace_id('t2')}" in error.message and "not JSON" in error.message


def test_bad_json_through_the_command_line_exits_2(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from rageval.cli import main

    spans = rag_trace("t1", "Q?", DOCS, "A.")
    spans[-1].attributes["gen_ai.input.messages"] = "{not json"
    path = write(tmp_path / "s.jsonl", spans)
    code = main(["score", str(path), "--input-format", "otel-genai", "-m", "ndcg@3",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "gen_ai.input.messages" in err and str(path) in err
    assert "Traceback" not in err


def test_a_messages_value_that_is_not_a_list_is_an_error(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "A.")
    spans[-1].attributes["gen_ai.output.messages"] = json.dumps({"role": "assistant"})
    with pytest.raises(InputError, match="expected a list of messages, found dict"):
        records(write(tmp_path / "s.jsonl", spans))


def test_units_are_top_level_spans_of_an_operation(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q1?", DOCS, "A1.")
    inner = GenaiSpan("t1", "t1-sub", "t1-root", "invoke_agent sub", 30, 40, {
        "gen_ai.operation.name": "invoke_agent"})
    path = write(tmp_path / "s.jsonl", [*spans, inner, *rag_trace("t2", "Q2?", DOCS, "A2.",
                                                                  t0=500)])
    found = records(path, trace_unit="INVOKE_AGENT")  # operations read in lower case
    assert [r.id for r in found] == [span_id("t1-root"), span_id("t2-root")]
    assert [[c.id for c in r.contexts] for r in found] == [["d1", "d2"]] * 2  # spans below
    chats = records(path, trace_unit="chat")
    assert [(r.id, r.answer, r.has("contexts")) for r in chats] == [
        (span_id("t1-chat"), "A1.", False), (span_id("t2-chat"), "A2.", False)]
    with pytest.raises(InputError, match="no span of operation embeddings"):
        records(path, trace_unit="embeddings")


def test_an_unknown_unit_lists_the_operations(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", rag_trace("t1", "Q?", DOCS, "A."))
    with pytest.raises(UsageError, match="did you mean 'invoke_agent'") as caught:
        spec(path, trace_unit="invoke_agnt").reader()
    assert "'execute_tool'" in str(caught.value)
    with pytest.raises(UsageError, match="one of"):
        spec(path, trace_unit="CHAIN").reader()  # an OpenInference kind is not an operation


def test_sessions_group_by_conversation_id(tmp_path: Path) -> None:
    spans = [*rag_trace("t2", "second?", DOCS, "2.", t0=500, conversation="c1"),
             *rag_trace("t1", "first?", DOCS, "1.", conversation="c1"),
             *rag_trace("t3", "alone?", DOCS, "3.", t0=900)]
    spans[0].attributes["session.id"] = "not-read"  # OpenInference's key: not GenAI's
    found = records(write(tmp_path / "s.jsonl", spans), sessions=True)
    alone, conversation = found[0], found[1:]
    assert alone.id == trace_id("t3") and alone.conversation is None
    assert [r.query for r in conversation] == ["first?", "second?"]
    assert {r.conversation.id for r in conversation} == {"c1"}


def test_map_and_references_join_as_for_openinference(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "A.")
    spans[0].attributes["metadata"] = json.dumps({"qid": "q1"})
    path = write(tmp_path / "s.jsonl", spans)
    references = tmp_path / "refs.jsonl"
    references.write_text(json.dumps({"id": "q1", "reference": "France.",
                                      "judgments": {"d1": 2}}) + "\n")
    loaded = load_inputs(spec(path, field_map=(("id", "metadata.qid"),),
                              references=str(references)))
    (record,) = loaded.records
    assert (record.id, record.references) == ("q1", ("France.",))
    assert dict(record.judgments or {}) == {"d1": 2}  # the file's judgments, joined
    with pytest.raises(UsageError, match="from retrieval spans"):
        spec(path, field_map=(("contexts", "x"),)).reader()


def test_a_phoenix_server_is_not_read_as_genai() -> None:
    with pytest.raises(UsageError, match="OpenInference"):
        InputSpec(kind="otel-genai", phoenix="http://localhost:6006", project="p").reader()


def test_the_pin_is_the_evaluation_events_pin() -> None:
    from rageval.inputs.traces import genai
    from rageval.otel import events

    assert genai.CONVENTIONS_COMMIT in events.CONVENTIONS
    assert genai.SCHEMA_URL == events.SCHEMA_URL


JSON = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers()
                    | st.text(), lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
PART_KEYS = st.sampled_from(["role", "parts", "content", "type", "finish_reason"])
MESSAGE_LIKE = st.lists(st.dictionaries(PART_KEYS, JSON, max_size=4) | JSON, max_size=4)


@given(st.one_of(JSON, MESSAGE_LIKE))
def test_any_json_is_read_or_refused_never_crashes(value: Any) -> None:
    for given_as in (value, json.dumps(value)):
        try:
            found = message_texts(given_as)
        except MessagesError:
            assert not isinstance(value, list) or not all(isinstance(v, dict) for v in value)
            continue
        assert all(isinstance(text, str | None) for _, text in found)


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]),
                          st.lists(st.text(), min_size=1, max_size=3)), max_size=4))
def test_text_parts_round_trip(items: list[tuple[str, list[str]]]) -> None:
    value = [{"role": role, "parts": [{"type": "text", "content": t} for t in texts]}
             for role, texts in items]
    expected = [(role, "\n".join(texts)) for role, texts in items]
    assert message_texts(json.dumps(value)) == expected == message_texts(value)


def _second_hop(trace: str, docs: list[dict[str, Any]]) -> GenaiSpan:
    return GenaiSpan(trace, f"{trace}-ret2", f"{trace}-root", "retrieval again", 12, 15, {
        "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps(docs)})


@pytest.mark.parametrize("first_has_content", [True, False])
def test_a_document_repeated_with_and_without_content_takes_the_content(
        tmp_path: Path, first_has_content: bool) -> None:
    with_text, ids_only = {"id": "d1", "score": 0.9, "content": "Paris."}, {"id": "d1"}
    first, again = (with_text, ids_only) if first_has_content else (ids_only, with_text)
    spans = rag_trace("t1", "Q?", [first], "A.")
    spans.append(_second_hop("t1", [again, {"id": "d2", "score": 0.4, "content": "Oslo."}]))
    (record,) = records(write(tmp_path / "s.jsonl", spans))
    assert [(c.id, c.text) for c in record.contexts] == [("d1", "Paris."), ("d2", "Oslo.")]
    assert record.contexts[0].score == (0.9 if first_has_content else None)  # its first rank
    assert CONTEXTS_WITHOUT_TEXT not in record.extra
    assert context_text_reason(record) is None


def test_mixed_content_counts_the_documents_no_copy_has_content_for(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q?", [DOCS[0], {"id": "d2"}, {"id": "d3", "content": None}], "A.")
    spans.append(_second_hop("t1", [{"id": "d2"}, {"id": "d1"}]))
    (record,) = records(write(tmp_path / "s.jsonl", spans))
    assert [(c.id, c.text) for c in record.contexts] == [
        ("d1", "Paris is in France."), ("d2", ""), ("d3", "")]
    assert context_text_reason(record) == (
        "the contexts have no text: 2 of 3 retrieved documents carry no content "
        "(gen_ai.retrieval.documents recorded ids only)")


def test_a_content_that_is_not_a_string_is_its_json_text(tmp_path: Path) -> None:
    docs = [{"id": "d1", "content": {"title": "Paris", "body": "é"}}, {"id": "d2", "content": 5}]
    (record,) = records(write(tmp_path / "s.jsonl", rag_trace("t1", "Q?", docs, "A.")))
    assert [c.text for c in record.contexts] == ['{"title": "Paris", "body": "é"}', "5"]
    assert CONTEXTS_WITHOUT_TEXT not in record.extra


def test_string_items_holding_json_objects_are_read(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "A.")
    spans[1].attributes["gen_ai.retrieval.documents"] = [json.dumps(doc) for doc in DOCS]
    chat = spans[-1].attributes
    chat["gen_ai.input.messages"] = [json.dumps(m) for m in json.loads(
        messages(("system", "S."), ("user", "Where?")))]
    chat["gen_ai.output.messages"] = [messages(("assistant", "There."))[1:-1]]
    (record,) = records(write(tmp_path / "s.jsonl", spans))
    assert (record.query, record.answer) == ("Where?", "There.")
    assert [(c.id, c.text) for c in record.contexts] == [
        ("d1", "Paris is in France."), ("d2", "Oslo is in Norway.")]


@pytest.mark.parametrize(("name", "items", "found"), [
    ("gen_ai.retrieval.documents", [json.dumps(DOCS[0]), 3], "item 1: expected a document "
                                                             "object, found integer"),
    ("gen_ai.retrieval.documents", [DOCS[0], True], "item 1: expected a document object"),
    ("gen_ai.retrieval.documents", json.dumps([DOCS[0], "not json"]),
     "item 1: not the JSON text of a document"),
    ("gen_ai.input.messages", ['{"role": "user"}', "[1]"],
     "item 1: expected a message object, found array"),
    ("gen_ai.output.messages", [1.5], "item 0: expected a message object, found number"),
])
def test_an_item_that_is_not_an_object_is_an_error_naming_attribute_and_index(
        tmp_path: Path, name: str, items: Any, found: str) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "A.")
    next(s for s in spans if name in s.attributes).attributes[name] = items
    with pytest.raises(InputError) as caught:
        records(write(tmp_path / "s.jsonl", spans))
    assert caught.value.field == name and found in caught.value.message
    assert f"attribute {name!r}" in caught.value.message


def test_the_answer_falls_back_to_the_roots_output_messages(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "A.")
    del spans[-1].attributes["gen_ai.output.messages"]
    spans[0].attributes["gen_ai.output.messages"] = json.dumps(
        [{"role": "model", "parts": [{"type": "text", "content": "From"},
                                     {"type": "text", "content": "the root."}]},
         {"role": "assistant", "parts": [{"type": "text", "content": "second"}]}])
    spans[-1].attributes["gen_ai.completion"] = "older form"  # after the root's messages
    (record,) = records(write(tmp_path / "s.jsonl", spans))
    assert record.answer == "From\nthe root."  # the first message, whatever its role


def test_the_answer_is_the_first_output_message_whatever_its_role(tmp_path: Path) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "A.")
    spans[-1].attributes["gen_ai.output.messages"] = messages(("model", "M."),
                                                              ("assistant", "A."))
    (record,) = records(write(tmp_path / "s.jsonl", spans))
    assert record.answer == "M."


@pytest.mark.parametrize("operation", ["plan", "search_memory", "create_memory",
                                       "update_memory", "upsert_memory", "delete_memory",
                                       "create_memory_store", "delete_memory_store"])
def test_the_registrys_newer_operations_are_units(tmp_path: Path, operation: str) -> None:
    spans = rag_trace("t1", "Q?", DOCS, "A.")
    spans[0].attributes["gen_ai.operation.name"] = operation
    (record,) = records(write(tmp_path / "s.jsonl", spans), trace_unit=operation)
    assert record.id == span_id("t1-root")


def test_an_error_names_the_attribute_whatever_the_document_id_holds(tmp_path: Path) -> None:
    doc_id = "retrieval.documents.7"
    docs = [{"id": doc_id, "content": "a"}, {"id": doc_id, "content": "b"}]
    with pytest.raises(InputError) as caught:
        records(write(tmp_path / "s.jsonl", rag_trace("t1", "Q?", docs, "A.")))
    assert f"document id {doc_id!r} holds two different texts" in caught.value.message
    assert "gen_ai.retrieval.documents.1)" in caught.value.message
