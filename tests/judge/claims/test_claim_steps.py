"""The claim-level steps as data: prompt files, rendering, reply schemas, reply parsing (with
property tests: the parsers never raise on any text and never pair a label with the wrong
item), and the claims and nuggets a record may bring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.errors import InputError
from rageval.core.records import records_from_dicts
from rageval.judge.claims.step_replies import parse_labels, parse_texts
from rageval.judge.claims.steps import (
    ASSIGN_LABELS,
    CHECK_LABELS,
    STEPS,
    labels_schema,
    list_schema,
    load_step,
    render_step,
)
from rageval.judge.claims.supplied import supplied_claims, supplied_nuggets
from rageval.judge.prompting.slots import escape

# ---- prompt files ----------------------------------------------------------------------------


@pytest.mark.parametrize("step", list(STEPS))
def test_every_built_in_step_prompt_loads_and_renders_its_inputs_in_slots(step: str) -> None:
    prompt = load_step(step)
    assert prompt.builtin and prompt.id == step and len(prompt.hash) == 64
    inputs = {name: [f"<{name} text & more>", "second"] if name in ("claims", "nuggets",
                                                                     "evidence", "sources")
              else [f"the {name}"] for name in STEPS[step].inputs}
    system, user = render_step(prompt, inputs)
    assert system["role"] == "system" and user["role"] == "user"
    assert system["content"].startswith(STEPS[step].opening)
    body = user["content"]
    for name in STEPS[step].inputs:
        for text in inputs[name]:
            assert escape(text) in body  # each text in its slot, escaped
    assert "<claims text" not in body and "<nuggets text" not in body
    assert render_step(prompt, inputs) == [system, user]  # a stable cache key


def test_a_missing_query_is_shown_as_none_given_and_numbered_items_are_counted() -> None:
    prompt = load_step("check_claims")
    _, user = render_step(prompt, {"query": [], "evidence": ["E"], "claims": ["a", "b", "c"]})
    assert "(none given)" in user["content"]
    assert 'n="3"' in user["content"] and '"1" to "3"' in user["content"]


def test_a_user_step_prompt_wins_and_bad_ones_are_refused(tmp_path: Path) -> None:
    text = load_step("extract_claims").template
    (tmp_path / "extract_claims.toml").write_text(
        'id = "extract_claims"\nversion = "9"\ndescription = "mine"\ntemplate = """\n'
        + text + '\n"""\n', encoding="utf-8")
    mine = load_step("extract_claims", tmp_path)
    assert mine.version == "9" and not mine.builtin
    assert mine.hash != load_step("extract_claims").hash
    (tmp_path / "check_claims.toml").write_text(
        'id = "check_claims"\nversion = "1"\ndescription = "x"\ntemplate = "{claims} {query}"\n',
        encoding="utf-8")
    with pytest.raises(InputError, match=r"placeholder \{evidence\}"):
        load_step("check_claims", tmp_path)
    (tmp_path / "nuggets_assign.toml").write_text('id = "other"\nversion = "1"\n'
                                                  'description = "x"\ntemplate = "x"\n')
    with pytest.raises(InputError, match="must have id"):
        load_step("nuggets_assign", tmp_path)


def test_label_schemas_name_every_item() -> None:
    schema = labels_schema("check_claims", "verdicts", 3, CHECK_LABELS).schema
    inner = schema["properties"]["verdicts"]
    assert inner["required"] == ["1", "2", "3"] and inner["additionalProperties"] is False
    assert inner["properties"]["2"]["enum"] == list(CHECK_LABELS)
    assert list_schema("extract_claims", "claims").schema["required"] == ["claims"]


# ---- replies ---------------------------------------------------------------------------------


def test_texts_and_labels_are_read_from_tolerant_replies() -> None:
    assert parse_texts('{"claims": [" a ", "", "b"]}', "claims") == ["a", "b"]
    assert parse_texts('Sure:\n```json\n{"claims": ["a"]}\n```', "claims") == ["a"]
    assert parse_texts('{"claims": []}', "claims") == []
    reply = '{"verdicts": {"2": "Neutral", "1": "entailed", "3": "CONTRADICTION"}}'
    assert parse_labels(reply, "verdicts", 3, CHECK_LABELS) == [
        "entailment", "neutral", "contradiction"]
    assert parse_labels('{"labels": ["support", "partial support"]}', "labels", 2,
                        ASSIGN_LABELS) == ["support", "partial_support"]


@pytest.mark.parametrize(("reply", "why"), [
    ("", "empty reply"),
    ("no json here", "no JSON object"),
    ('{"claims": "one"}', "not a list"),
    ('{"claims": [1]}', "not a text"),
    ('{"other": []}', "no 'claims'"),
    ('{"claims": ["a"]} and the text says {"claims": ["b"]}', "conflicting"),
])
def test_unreadable_text_lists_say_why(reply: str, why: str) -> None:
    outcome = parse_texts(reply, "claims")
    assert isinstance(outcome, str) and why in outcome


@pytest.mark.parametrize(("reply", "why"), [
    ('{"verdicts": {"1": "entailment"}}', "no label for item 2"),
    ('{"verdicts": {"1": "neutral", "2": "neutral", "3": "neutral"}}', "not asked about"),
    ('{"verdicts": {"1": "maybe", "2": "neutral"}}', "not one of"),
    ('{"verdicts": ["neutral"]}', "no label for item 2"),
    ('{"verdicts": 3}', "not an object"),
    ('{"verdicts": {"1": "neutral", "2": "neutral"}} quoted: '
     '{"verdicts": {"1": "entailment", "2": "neutral"}}', "conflicting"),
])
def test_unreadable_labels_say_why(reply: str, why: str) -> None:
    outcome = parse_labels(reply, "verdicts", 2, CHECK_LABELS)
    assert isinstance(outcome, str) and why in outcome


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_parsers_never_raise_on_any_text(text: str) -> None:
    assert isinstance(parse_texts(text, "claims"), (list, str))
    assert isinstance(parse_labels(text, "verdicts", 2, CHECK_LABELS), (list, str))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(CHECK_LABELS), min_size=1, max_size=12), st.randoms())
def test_labels_are_returned_in_item_order_whatever_the_key_order(labels: list[str],
                                                                  rng: object) -> None:
    items = [(str(n), label) for n, label in enumerate(labels, 1)]
    rng.shuffle(items)  # type: ignore[attr-defined]
    reply = json.dumps({"verdicts": dict(items)})
    assert parse_labels(reply, "verdicts", len(labels), CHECK_LABELS) == labels


# ---- what a record brings --------------------------------------------------------------------


def _record(**extra: object):
    base = {"id": "q1", "query": "q", "answer": "a", "reference": "r",
            "contexts": [{"id": "d1", "text": "x"}, {"id": "d2", "text": "y"}]}
    return records_from_dicts([{**base, **extra}])[0]


def test_supplied_claims_read_every_form() -> None:
    record = _record(claims={
        "answer": [{"text": "A1", "reference": True, "contexts": ["d2"]},
                   {"text": ["Nile", "is", "long"], "reference": "Contradiction",
                    "contexts": {"d1": "neutral", "d2": "entailment"}}],
        "reference": ["R1", "R2"]})
    given_claims = supplied_claims(record)
    answer = given_claims["answer"]
    assert answer.texts == ("A1", "Nile is long")
    assert answer.other == ("entailment", "contradiction")
    assert answer.contexts == ({"d1": "neutral", "d2": "entailment"},
                               {"d1": "neutral", "d2": "entailment"})
    assert given_claims["reference"].texts == ("R1", "R2")
    assert given_claims["reference"].other is None and given_claims["reference"].contexts is None
    csv_like = _record(claims=json.dumps({"reference": ["R"]}))
    assert supplied_claims(csv_like)["reference"].texts == ("R",)


@pytest.mark.parametrize(("claims", "field", "why"), [
    ({"answer": "text"}, "claims.answer", "list of claims"),
    ({"answers": []}, "claims.answers", "unknown side"),
    ({"answer": [{"text": "a", "contexts": ["d9"]}]}, "claims.answer[0].contexts", "'d9'"),
    ({"answer": [{"text": "a", "contexts": {"d1": "neutral"}}]}, "claims.answer[0].contexts",
     "lacks context 'd2'"),
    ({"answer": [{"text": "a", "reference": "yes"}]}, "claims.answer[0].reference",
     "one of entailment"),
    ({"answer": [{"text": "a", "reference": "neutral"}, "b"]}, "claims.answer[1]",
     "for every item or for none"),
    ({"answer": [{"text": " "}]}, "claims.answer[0]", "non-empty text"),
    ({"reference": [{"text": "a", "reference": "neutral"}]}, "claims.reference[0].reference",
     "unknown key"),
])
def test_bad_supplied_claims_name_the_record_and_field(claims: object, field: str,
                                                      why: str) -> None:
    with pytest.raises(InputError, match=why) as caught:
        supplied_claims(_record(claims=claims))
    assert caught.value.field == field and "'q1'" in str(caught.value)


def test_supplied_nuggets() -> None:
    nuggets = supplied_nuggets(_record(nuggets=[
        {"text": "n1", "importance": "Vital", "assignment": "support"},
        {"text": "n2", "importance": "okay", "assignment": "not_support"}]))
    assert nuggets is not None and nuggets.importance == ("vital", "okay")
    assert nuggets.assignment == ("support", "not_support")
    plain = supplied_nuggets(_record(nuggets=["n1", "n2"]))
    assert plain is not None and plain.texts == ("n1", "n2") and plain.importance is None
    assert supplied_nuggets(_record()) is None
    with pytest.raises(InputError, match="for every item or for none"):
        supplied_nuggets(_record(nuggets=[{"text": "a", "importance": "vital"}, "b"]))
    with pytest.raises(InputError, match="one of support"):
        supplied_nuggets(_record(nuggets=[{"text": "a", "assignment": "yes"}]))


def test_the_metrics_table_lists_every_claim_level_metric() -> None:
    from rageval.judge.catalog import _CLAIM_LEVEL
    from rageval.judge.claims.metrics import KINDS

    assert list(_CLAIM_LEVEL) == [f"{kind}:{target}" for kind, cls in KINDS.items()
                                  for target in cls.targets]


# ---- edges found in review -------------------------------------------------------------------


def test_step_prompts_in_a_prompts_dir_are_not_listed_or_loaded_as_rubrics(tmp_path: Path) -> None:
    from rageval.core.errors import UsageError
    from rageval.judge.prompting.prompt_files import NOT_RUBRICS
    from rageval.judge.rubric.rubrics import list_rubrics, load_rubric

    assert {"pairwise", *STEPS} == NOT_RUBRICS
    (tmp_path / "check_claims.toml").write_bytes(
        (Path(load_step("check_claims").source)).read_bytes())
    assert "check_claims" not in list_rubrics(tmp_path)
    with pytest.raises(UsageError, match="step of the claim-level metrics"):
        load_rubric("check_claims", tmp_path)


def test_citations_of_a_record_without_contexts_are_unscored_not_zero() -> None:
    from rageval.api import evaluate

    records = records_from_dicts([{"id": "q1", "query": "q", "answer": "Paris [1]. Big [2].",
                                   "contexts": []},
                                  {"id": "q2", "query": "q", "answer": "Plain.",
                                   "contexts": [{"id": "d1", "text": "x"}]}])
    results = evaluate(records, ["citations:recall", "citations:precision"], bootstrap=10)
    first, second = results.records
    for name in ("citations:recall", "citations:precision"):
        assert first.scores[name] is None
        assert "has no contexts" in first.errors[name]
    # An uncited statement is a real 0 for recall (no request needed), as in ALCE.
    assert second.scores["citations:recall"] == 0.0


def test_a_later_citation_round_reports_the_failure_that_stopped_it() -> None:
    from rageval.judge.claims.citation_scores import citation_score

    details = {"statements": [{"text": "s", "cites": ["d1", "d2"], "invalid": [],
                               "supported": True, "alone": {"d1": False, "d2": True},
                               "without": None}],
               "errors": {"alone": "checking statements against each cited passage alone: "
                                   "judge request failed: HTTP 500"}}
    value, reason = citation_score(details, "precision")
    assert value != value and "HTTP 500" in (reason or "")


def test_everything_supplied_signs_no_judge_and_no_prompt() -> None:
    from rageval.api import evaluate

    record = {"id": "q1", "query": "q", "answer": "a", "reference": "r",
              "contexts": [{"id": "d1", "text": "x"}],
              "claims": {"answer": [{"text": "A", "reference": True, "contexts": ["d1"]}]}}
    results = evaluate(records_from_dicts([record]), ["claims:precision"], bootstrap=10)
    signature = results.summary["claims:precision"].signature
    assert results.records[0].scores["claims:precision"] == 1.0
    for field in ("judge:none", "extract_claims:none", "check_claims:none", "from:record"):
        assert field in signature, signature
    # The manifest names step prompts with the keys it uses for rubrics.
    recorded = results.manifest["claims"]["prompts"]["check_claims"]
    assert recorded == {"version": "1", "hash": load_step("check_claims").hash,
                        "source": load_step("check_claims").source}
