"""A unit moved to another record index (a batch of the scope it was made for) is the unit
:func:`dataclasses.replace` makes, every field kept, its key included."""

from __future__ import annotations

import dataclasses

from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.units import Unit


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
