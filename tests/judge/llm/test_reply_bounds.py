"""The length bounds of llama.cpp's schema form: every free-text string and list of a reply
schema bounded in ``json_object+schema`` (a grammar-enforcing server makes a looping small
model close its JSON), nothing added to OpenAI's strict ``json_schema``, which does not take
``maxLength``."""

from __future__ import annotations

from rageval.judge.claims.steps import CHECK_LABELS, labels_schema, list_schema
from rageval.judge.llm.transport.formats import (
    ITEM_MAX_CHARS,
    LIST_MAX_ITEMS,
    TEXT_MAX_CHARS,
    bounded,
)
from rageval.judge.pairwise.prompt import verdict_schema
from rageval.judge.rubric.render import reply_schema
from rageval.judge.rubric.rubrics import load_rubric


def test_a_rubric_reply_bounds_its_reasoning_only_in_llama_cpps_form() -> None:
    schema = reply_schema(load_rubric("faithfulness"))
    grammar = schema.wire("json_object+schema")
    assert grammar is not None
    props = grammar["schema"]["properties"]
    assert props["reasoning"] == {"type": "string", "maxLength": TEXT_MAX_CHARS}
    assert props["score"] == schema.schema["properties"]["score"]  # an enum: bounded already
    strict = schema.wire("json_schema")
    assert strict is not None
    assert "maxLength" not in str(strict) and strict["json_schema"]["schema"] is schema.schema
    assert "maxLength" not in str(schema.schema)  # the schema itself is not changed


def test_lists_and_their_items_are_bounded() -> None:
    claims = list_schema("extract_claims", "claims").wire("json_object+schema")
    assert claims is not None
    assert claims["schema"]["properties"]["claims"] == {
        "type": "array", "maxItems": LIST_MAX_ITEMS,
        "items": {"type": "string", "maxLength": ITEM_MAX_CHARS}}
    labels = labels_schema("check_claims", "verdicts", 2, CHECK_LABELS).schema
    assert bounded(labels) == labels  # enums only: nothing to bound
    verdict = bounded(verdict_schema().schema)
    assert verdict["properties"]["reasoning"]["maxLength"] == TEXT_MAX_CHARS
    assert "maxLength" not in verdict["properties"]["verdict"]


def test_a_bound_the_schema_sets_itself_is_kept() -> None:
    own = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 40},
                                             "tags": {"type": "array", "maxItems": 3,
                                                      "items": {"type": "string"}}}}
    out = bounded(own)
    assert out["properties"]["note"]["maxLength"] == 40
    assert out["properties"]["tags"]["maxItems"] == 3
    assert out["properties"]["tags"]["items"]["maxLength"] == ITEM_MAX_CHARS
