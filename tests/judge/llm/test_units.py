"""A unit moved to another record index (a batch of the scope it was made for) is the unit
:func:`dataclasses.replace` makes, every field kept, its key included; a unit made at once is
the unit its ``__init__`` makes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.units import Unit, new_unit


def test_a_unit_at_another_record_keeps_every_other_field() -> None:
    schema = ReplySchema("s", {"type": "object"})
    unit = Unit(3, 1, 2, [{"role": "user", "content": "x"}], {"json_schema": "a" * 64,
                                                            "text": "b" * 64},
                order=1, schema=schema, request_id="c" * 64)
    moved = unit.at(0)
    assert moved == dataclasses.replace(unit, record=0)
    assert [getattr(moved, f.name) for f in dataclasses.fields(Unit)] == \
        [0, *(getattr(unit, f.name) for f in dataclasses.fields(Unit)[1:])]
    assert moved.key == unit.key == "a" * 64
    assert unit.at(3) is unit


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 5), st.none() | st.integers(0, 3), st.integers(0, 2),
       st.dictionaries(st.sampled_from(["json_schema", "json_object", "text"]),
                       st.text(min_size=1, max_size=3), min_size=1),
       st.integers(0, 2), st.booleans(), st.none() | st.text(max_size=3))
def test_a_unit_made_at_once_is_the_unit_its_init_makes(
        record: int, context: int | None, sample: int, keys: dict[str, str], order: int,
        with_schema: bool, request_id: str | None) -> None:
    schema = ReplySchema("s", {"type": "object"}) if with_schema else None
    messages = [{"role": "user", "content": "x"}]
    made = new_unit(record, context, sample, messages, keys, order, schema, request_id)
    plain = Unit(record, context, sample, messages, keys, order, schema, request_id)
    assert made == plain
    assert vars(made) == vars(plain)
    assert made.lookup() == plain.lookup()
    assert dataclasses.replace(made, record=record + 1) == plain.at(record + 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.record = 9  # type: ignore[misc]
