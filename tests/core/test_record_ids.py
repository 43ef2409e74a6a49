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


@settings(max_examples=300, deadline=None)
@given(ids=st.lists(st.sampled_from([f"q{i}" for i in range(30)]), min_size=1, max_size=60),
       chunk=st.integers(1, 9), memory=st.sampled_from([0, 1, 5, 1 << 17]),
       bucket=st.integers(1, 8))
def test_the_first_clash_by_line_is_refused(ids: list[str], chunk: int, memory: int,
                                            bucket: int) -> None:
    """Whether the earlier use is kept in memory or on disk (``memory``: the ids kept in
    memory; ``bucket``: the ids sorted at once on disk)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_ids, "ID_CHUNK", chunk)
        patch.setattr(record_ids, "MEMORY_IDS", memory)
        patch.setattr(record_ids, "BUCKET_IDS", bucket)
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


def test_ids_past_memory_go_to_disk_and_clash_at_the_end(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path) -> None:
    monkeypatch.setattr(record_ids, "MEMORY_IDS", 100)
    monkeypatch.setattr(record_ids, "BUCKET_IDS", 64)
    monkeypatch.setattr(record_ids, "ID_CHUNK", 50)
    ids = [f"id-{i}" for i in range(1000)] + ["id-512", "late"]
    items = [(line, {"id": i}) for line, i in enumerate(ids, 1)]
    seen = []
    with pytest.raises(InputError) as info:
        for record in validate_records(items, "f", "line"):
            seen.append(record.id)
    assert len(seen) == 1002  # the spilled ids are checked among themselves at the end
    assert info.value.line == 1001
    assert "duplicate record id 'id-512' (first used at line 513)" in str(info.value)
    # An id of the first hundred is refused as soon as its chunk is checked.
    early = [(line, {"id": i}) for line, i in enumerate(
        [f"id-{i}" for i in range(300)] + ["id-7"] + [f"x{i}" for i in range(200)], 1)]
    read = 0
    with pytest.raises(InputError, match="'id-7' \\(first used at line 8\\)"):
        for _ in validate_records(early, "f", "line"):
            read += 1
    assert read < 400
