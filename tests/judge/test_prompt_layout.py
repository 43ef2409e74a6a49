"""Every judge prompt is laid out for prefix caches: the system message depends on the prompt
alone, and in the user message the prompt's instructions and the reply instructions come
before the first text that depends on the record (its first slot, whose tag carries the
record's nonce, or the turns before it); only the labels between the record's fields follow.
Checked for every kind of prompt (rubrics, a per-context rubric, each claim-level step, the
pairwise prompt) over records drawn at random, hostile texts among them."""

from __future__ import annotations

import random
import re

import pytest

from rageval.core.records import Record, records_from_dicts
from rageval.judge.claims.steps import STEPS, load_step, render_step
from rageval.judge.pairwise.prompt import load_pairwise_prompt, render_pair
from rageval.judge.prompting.history import history_of
from rageval.judge.prompting.layout import fixed_first, split_template
from rageval.judge.rubric.render import render
from rageval.judge.rubric.rubrics import list_rubrics, load_rubric

_SLOT = re.compile(r"<[a-z_]+-[0-9a-f]{12}[ >]")
_SLOT_TEXT = re.compile(r"<([a-z_]+)-([0-9a-f]{12})[^>]*>.*?</\1-\2>", re.S)
_WORDS = ["revenue", "grew", "Reply", "with", "one", "JSON", "object", "only:", "score", "5",
          "<answer-0123456789ab>", "&lt;", "ignore", "the", "rubric", "{answer}", "\n", "Query:"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 25)))


def _records(seed: int, n: int = 6) -> list[Record]:
    rng = random.Random(seed)
    return records_from_dicts([{
        "id": f"r{i}", "query": _text(rng), "answer": _text(rng), "reference": _text(rng),
        "contexts": [_text(rng) for _ in range(rng.randint(1, 4))]} for i in range(n)])


def _first_record_text(user: str) -> int:
    """Where the first text that depends on the record starts: its first slot's tag."""
    found = _SLOT.search(user)
    assert found is not None, user
    return found.start()


def _check_layout(messages: list[list[dict[str, str]]]) -> None:
    """The invariants over the prompts of several records for one prompt kind."""
    systems = {m[0]["content"] for m in messages}
    assert len(systems) == 1  # the system message depends on the prompt alone
    fixed = set()
    for m in messages:
        user = m[-1]["content"]
        at = _first_record_text(user)
        head, after = user[:at], user[at:]
        # the reply instructions are fixed and come before the record, never after it
        assert "Reply with one JSON object only" in head or "reply with one JSON object only" \
            in head, head
        assert "JSON object only" not in _SLOT_TEXT.sub("", after)
        # what precedes the first record text is the same for every record, up to the labels
        # of the paragraph that holds the first field
        fixed.add(head.rsplit("\n\n", 1)[0])
    assert len(fixed) == 1
    first, second = (m[-1]["content"] for m in messages[:2])
    pairs = zip(first, second, strict=False)
    shared = next((i for i, (a, b) in enumerate(pairs) if a != b), len(first))
    assert shared >= _first_record_text(first) - 1


RUBRIC_KINDS = [name for name in list_rubrics() if name not in ("resolution", "consistency")]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", RUBRIC_KINDS)
def test_rubric_prompts_put_the_record_last(name: str, seed: int) -> None:
    rubric = load_rubric(name)
    records = _records(seed)
    context = 0 if "context" in rubric.inputs else None
    _check_layout([render(rubric, r, context) for r in records])


def test_the_per_context_rubric_puts_each_context_last() -> None:
    rubric = load_rubric("context_relevance")
    record = _records(7, 1)[0]
    _check_layout([render(rubric, record, i) for i in range(len(record.contexts))]
                  + [render(rubric, r, 0) for r in _records(8)])


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_claim_steps_put_the_record_last(step: str, seed: int) -> None:
    prompt = load_step(step)
    rng = random.Random(seed)
    requests = [{name: [_text(rng) for _ in range(rng.randint(1, 3))]
                 for name in STEPS[step].inputs} for _ in range(6)]
    rendered = [render_step(prompt, inputs) for inputs in requests]
    _check_layout(rendered)
    for inputs, messages in zip(requests, rendered, strict=True):
        numbered = next((name for name in ("claims", "nuggets") if name in inputs), None)
        if numbered is not None:  # the count, which depends on the record, comes last
            n = len(inputs[numbered])
            assert messages[-1]["content"].endswith(f'"{n}".' if n > 1 else '"1".')


@pytest.mark.parametrize("seed", [0, 1])
def test_the_pairwise_prompt_puts_the_record_last(seed: int) -> None:
    prompt = load_pairwise_prompt()
    rng = random.Random(seed)
    _check_layout([render_pair(prompt, r, _text(rng), _text(rng)) for r in _records(seed)])


def test_the_turns_before_come_after_the_instructions() -> None:
    turns = [{"query": f"question {i}?", "answer": f"answer {i}.", "contexts": [f"passage {i}"]}
             for i in range(3)]
    records = records_from_dicts([{"id": "c", "turns": turns}])
    rubric = load_rubric("answer_relevance")
    user = render(rubric, records[2])[-1]["content"]
    assert user.index("JSON object only") < user.index("question 0?") < user.index(
        "question 2?")
    steps = render_step(load_step("extract_claims"), {"query": ["q"], "text": ["t"]},
                        history_of(records[2]))[-1]["content"]
    assert steps.index("JSON object only") < steps.index("question 0?")


@pytest.mark.parametrize(("template", "parts"), [
    ("Do this.\n\nMore.\n\nQuery:\n{query}\n", ("Do this.\n\nMore.", "Query:\n{query}\n")),
    ("{query} first", ("", "{query} first")),
    ("Label: {query}\n\nEnd.", ("", "Label: {query}\n\nEnd.")),
    ("No fields.", ("No fields.", "")),
])
def test_split_template(template: str, parts: tuple[str, str]) -> None:
    assert split_template(template) == parts


def test_fixed_first_places_the_reply_before_the_fields() -> None:
    blocks: dict[str, str] = {"query": "<query-x>\nq\n</query-x>"}
    out = fixed_first("Grade it.\n\nQuery:\n{query}", blocks, "Reply now.", "turns")
    assert out == "Grade it.\n\nReply now.\n\nturns\n\nQuery:\n<query-x>\nq\n</query-x>"

