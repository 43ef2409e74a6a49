"""Duplicate record ids refused with the first clash by line, whether the earlier use is in the
same chunk of ids or long before it (kept as digests)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.errors import InputError
from rageval.core.records import ids as record_ids
from rageval.core.records.ids import SeenIds, digests
from rageval.core.records.validation import validate_records


def first_duplicate(ids: list[str]) -> tuple[int, str, int] | None:
    """The reference: (line, id, first line) of the first id used twice, by line."""
    seen: dict[str, int] = {}
    for line, record_id in enumerate(ids, 1):
        if record_id in seen:
            return line, record_id, seen[record_id]
        seen[record_id] = line
    return None


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.sampled_from([f"q{i}" for i in range(30)]), min_size=1, max_size=60),
       chunk=st.integers(1, 9))
def test_the_first_clash_by_line_is_refused(ids: list[str], chunk: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_ids, "ID_CHUNK", chunk)
        items = [(line, {"id": record_id}) for line, record_id in enumerate(ids, 1)]
        expected = first_duplicate(ids)
        if expected is None:
            assert [r.id for r in validate_records(items, "f", "line")] == ids
            return
        with pytest.raises(InputError) as info:
            list(validate_records(items, "f", "line"))
    line, record_id, first = expected
    assert info.value.line == line
    assert f"duplicate record id {record_id!r} (first used at line {first})" in str(info.value)


def test_a_clash_before_a_bad_line_is_the_first_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_ids, "ID_CHUNK", 2)
    items = [(1, {"id": "a"}), (2, {"id": "b"}), (3, {"id": "a"}), (4, {"id": 5})]
    with pytest.raises(InputError, match="duplicate record id 'a'"):
        list(validate_records(items, "f", "line"))


def test_seen_ids_find_first_lines_across_levels() -> None:
    seen = SeenIds()
    for start in range(0, 5000, 700):
        ids = [f"id{i}" for i in range(start, min(start + 700, 5000))]
        seen.add(digests(ids), np.arange(start + 1, start + 1 + len(ids)))
    assert len(seen) == 5000
    found = seen.first_lines(digests(["id0", "id4999", "id2500", "missing"]))
    assert found.tolist() == [1, 5000, 2501, 0]
    halves = np.array([[5, 1], [5, 2], [7, 1]], dtype=np.uint64)  # a shared first half
    shared = SeenIds()
    shared.add(halves, np.array([1, 2, 3]))
    probe = np.array([[5, 2], [5, 3], [7, 1]], dtype=np.uint64)
    assert shared.first_lines(probe).tolist() == [2, 0, 3]
