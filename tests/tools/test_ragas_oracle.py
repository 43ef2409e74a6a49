"""The tool-call metrics against ragas 0.4.3 (``ToolCallF1``, ``ToolCallAccuracy``) on the
cases where the two definitions coincide (docs/tools.md says where they differ):

- F1: rageval's ``tools:f1`` (exact arguments, any order) equals ragas' ``ToolCallF1``
  (rounded to 4 decimals as ragas rounds) when neither list repeats a call and at least one
  is not empty;
- strict accuracy: ragas gives 1 exactly when ``tools:f1(match=args_subset,order=strict)``
  is 1 (unless an expected call without arguments meets a call with some, which ragas scores
  0), and 0 whenever the names differ in order (``tools:f1(match=name,order=strict)`` < 1);
- any-order accuracy: on calls whose arguments have the same keys for one name, ragas gives 1
  exactly when ``tools:f1`` (exact, any order) is 1;
- multi-turn samples built and written by ragas itself, read with ``--input-format ragas``:
  ``tools:f1(scope=conversation)`` equals ``ToolCallF1``, and the strict accuracy holds as
  above over the conversation's calls.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from ragas_oracle import ragas_multi_turn, ragas_scores

from rageval.api import evaluate
from rageval.core.records import ToolCall
from rageval.tools.matching import pair_calls

pytestmark = pytest.mark.parity

NAMES = ("search", "lookup", "calc")


def _arguments(rng: random.Random, name: str, same_keys: bool) -> dict[str, Any]:
    keys = {"search": ["q", "k"], "lookup": ["id"], "calc": ["expr", "digits"]}[name]
    if not same_keys:
        keys = rng.sample([*keys, "extra"], rng.randint(0, len(keys) + 1))
    values: list[Any] = ["a", "b", 1, 2, ["x", 1], {"deep": "a"}]
    return {key: rng.choice(values) for key in keys}


def _calls(rng: random.Random, count: int, same_keys: bool) -> list[dict[str, Any]]:
    out = []
    for _ in range(count):
        name = rng.choice(NAMES)
        out.append({"name": name, "arguments": _arguments(rng, name, same_keys)})
    return out


def _cases(seed: int, count: int, same_keys: bool) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        expected = _calls(rng, rng.randint(0, 3), same_keys)
        calls = [dict(call) for call in expected]
        for _ in range(rng.randint(0, 2)):  # the agent strays from what was expected
            change = rng.choice(["drop", "add", "swap", "args"])
            if change == "drop" and calls:
                calls.pop(rng.randrange(len(calls)))
            elif change == "add":
                calls.insert(rng.randint(0, len(calls)), *_calls(rng, 1, same_keys))
            elif change == "swap" and len(calls) > 1:
                i, j = rng.sample(range(len(calls)), 2)
                calls[i], calls[j] = calls[j], calls[i]
            elif change == "args" and calls:
                i = rng.randrange(len(calls))
                calls[i] = {"name": calls[i]["name"],
                            "arguments": _arguments(rng, calls[i]["name"], same_keys)}
        cases.append({"calls": calls, "expected": expected})
    return cases


def _matched(case: dict[str, Any], match: str, order: str) -> tuple[int, int, int]:
    calls = [ToolCall(c["name"], c["arguments"]) for c in case["calls"]]
    expected = [ToolCall(c["name"], c["arguments"]) for c in case["expected"]]
    return len(pair_calls(calls, expected, match=match, order=order)), len(calls), len(expected)


def _f1(case: dict[str, Any], match: str, order: str) -> float:
    matched, calls, expected = _matched(case, match, order)
    return 1.0 if calls + expected == 0 else 2 * matched / (calls + expected)


def _repeats(calls: list[dict[str, Any]]) -> bool:
    keys = [repr((c["name"], sorted(c["arguments"].items(), key=repr))) for c in calls]
    return len(set(keys)) != len(keys)


@pytest.fixture(scope="module")
def scored() -> list[tuple[dict[str, Any], dict[str, float]]]:
    cases = _cases(7, 400, same_keys=False) + _cases(8, 200, same_keys=True)
    return list(zip(cases, ragas_scores(cases), strict=True))


def test_f1_equals_ragas_tool_call_f1(scored):
    compared = 0
    for case, ragas in scored:
        if _repeats(case["calls"]) or _repeats(case["expected"]):
            continue
        if not case["calls"] and not case["expected"]:
            assert ragas["f1"] == 0.0  # ragas' value; rageval's is 1 (agreement on no calls)
            continue
        assert round(_f1(case, "exact", "any"), 4) == ragas["f1"], case
        compared += 1
    assert compared > 300


def test_strict_accuracy_is_one_exactly_when_every_call_is_in_place(scored):
    ones = zeros = 0
    for case, ragas in scored:
        if not case["calls"] or not case["expected"]:
            continue
        in_place = _f1(case, "args_subset", "strict") == 1.0
        if in_place and any(not want["arguments"] and call["arguments"] for call, want
                            in zip(case["calls"], case["expected"], strict=True)):
            # ragas scores an expected call without arguments 0 against a call with some;
            # args_subset pairs them (every expected argument, of none, is there).
            assert ragas["accuracy"] < 1.0
            continue
        assert (ragas["accuracy"] == 1.0) == in_place, case
        if _f1(case, "name", "strict") < 1.0:
            assert ragas["accuracy"] == 0.0, case
            zeros += 1
        ones += in_place
    assert ones > 50 and zeros > 50


def test_any_order_accuracy_is_one_exactly_when_the_calls_agree(scored):
    compared = 0
    for case, ragas in scored[400:]:  # the cases whose calls of one name have the same keys
        if not case["calls"] or not case["expected"]:
            continue
        assert (ragas["accuracy_any"] == 1.0) == (_f1(case, "exact", "any") == 1.0), case
        compared += 1
    assert compared > 100


def test_multi_turn_samples_written_by_ragas_score_as_ragas_scores_them(tmp_path):
    rng = random.Random(11)
    cases = []
    for case in _cases(12, 60, same_keys=False):
        if _repeats(case["calls"]) or _repeats(case["expected"]) or not case["expected"]:
            continue
        calls = list(case["calls"])
        turns = []
        for n in range(rng.randint(1, 3)):  # the calls spread over the turns, in order
            take = calls[: rng.randint(0, len(calls))] if n < 2 else calls
            calls = calls[len(take):]
            turns.append({"query": f"question {n}", "calls": take,
                          "results": [f"result of {c['name']}" for c in take],
                          "answer": f"answer {n}"})
        turns[-1]["calls"] += calls
        turns[-1]["results"] += [f"result of {c['name']}" for c in calls]
        cases.append({"turns": turns, "expected": case["expected"]})
    jsonl = tmp_path / "ragas.jsonl"
    scores = ragas_multi_turn(cases, jsonl)
    from rageval.inputs import InputSpec

    results = evaluate(InputSpec(str(jsonl), kind="ragas"),
                       ["tools:f1(scope=conversation)",
                        "tools:f1(match=args_subset,order=strict,scope=conversation)"],
                       bootstrap=10)
    whole = [r for r in results.records if r.turn is None and r.conversation is not None]
    assert len(whole) == len(cases) > 30
    for row, case, ragas in zip(whole, cases, scores, strict=True):
        made = [c for turn in case["turns"] for c in turn["calls"]]
        assert round(row.scores["tools:f1(scope=conversation)"], 4) == ragas["f1"], case
        if made:
            in_place = row.scores[
                "tools:f1(match=args_subset,order=strict,scope=conversation)"] == 1.0
            if in_place and any(not want["arguments"] and call["arguments"]
                                for call, want in zip(made, case["expected"], strict=True)):
                continue  # ragas scores an expected call without arguments 0 (see above)
            assert (ragas["accuracy"] == 1.0) == in_place, case
