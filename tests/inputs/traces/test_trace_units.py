"""Records from a chosen span kind (``--trace-unit``): the top-level spans of the kind are
found in time linear in the spans, and as walking each span's ancestors finds them."""

from __future__ import annotations

import random

import pytest

from rageval.inputs.traces import tree
from rageval.inputs.traces.openinference import unit_records
from rageval.inputs.traces.spans import Span


def span(span_id: str, parent: str | None, kind: str, start: int) -> Span:
    return Span("t" * 32, span_id, parent, span_id, kind, start, start + 1, {}, start + 1)


def tool_chain(n: int) -> list[Span]:
    """A chain of ``n`` TOOL spans, each the parent of the next and of one CHAIN leaf."""
    spans = []
    for i in range(n):
        spans.append(span(f"tool{i}", f"tool{i - 1}" if i else None, "TOOL", 2 * i))
        spans.append(span(f"chain{i}", f"tool{i}", "CHAIN", 2 * i + 1))
    return spans


@pytest.mark.parametrize("n", [300, 3000])
def test_a_chain_of_spans_is_walked_once(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    # Each parent is looked up once, however deep the chain: the work is counted, not timed.
    lookups = 0
    parent = tree.parent_span

    def counted(s: Span, by_id: dict[str, Span]) -> Span | None:
        nonlocal lookups
        lookups += 1
        return parent(s, by_id)

    monkeypatch.setattr(tree, "parent_span", counted)
    found = list(unit_records(tool_chain(n), "CHAIN", {}, "t.json"))
    assert [item["id"] for _, item in found] == [f"chain{i}" for i in range(n)]
    assert lookups <= 2 * len(tool_chain(n))


def _old_rule(s: Span, by_id: dict[str, Span], kind: str) -> bool:
    """Walking each span's ancestors (the rule the linear walk must agree with)."""
    seen = {s.span_id}
    parent = by_id.get(s.parent_id or "")
    while parent is not None and parent.span_id not in seen:
        if parent.kind == kind:
            return True
        seen.add(parent.span_id)
        parent = by_id.get(parent.parent_id or "")
    return False


@pytest.mark.parametrize("seed", range(40))
def test_top_level_units_agree_with_walking_every_ancestor(seed: int) -> None:
    # Random forests with parents missing from the trace and parent cycles (malformed input).
    rng = random.Random(seed)
    n = rng.randint(1, 25)
    ids = [f"s{i}" for i in range(n)]
    spans = [span(i, rng.choice([None, "gone", *ids]), rng.choice(["CHAIN", "TOOL", "LLM"]),
                  rng.randint(0, 9)) for i in ids]
    by_id = {s.span_id: s for s in spans}
    expected = sorted(s.span_id for s in spans
                      if s.kind == "CHAIN" and not _old_rule(s, by_id, "CHAIN"))
    found = sorted(item["id"] for _, item in unit_records(spans, "CHAIN", {}, "t.json"))
    assert found == expected
