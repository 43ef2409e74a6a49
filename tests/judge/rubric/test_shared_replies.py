"""What judge metrics prepare for a batch is a typed value: the replies the rubric metrics asking
one judge share (:class:`SharedReplies`), gathered once for the batch's scope by the first of them
to score and read by every one; values kept in a batch or a run are typed by their
:class:`~rageval.core.metric.Slot`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_server import TEST_KEY, TEST_KEY_ENV, JudgeServer, fact_records, keyed_options

from rageval.core.metric import Batch, ScoreOptions, Slot
from rageval.core.records import load_records
from rageval.core.registry import create
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.llm.transport.requests import JudgeRequest, JudgeResult
from rageval.judge.rubric.hooks import GROUP
from rageval.judge.rubric.metric import BatchReplies, JudgeMetric, SharedReplies


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    with JudgeServer(expected_key=TEST_KEY) as s:
        yield s



def test_slots_keep_one_value_each_built_once() -> None:
    batch = Batch([])
    built: list[int] = []
    counts = Slot[list[int]](("toy", "counts"))

    def build() -> list[int]:
        built.append(1)
        return [1, 2]

    assert batch.cached(counts, build) == [1, 2]
    assert batch.cached(Slot[list[int]](("toy", "counts")), build) is batch.cached(counts, build)
    assert built == [1]  # a slot of the same name is the same slot
    assert batch.cached(Slot[list[int]](("toy", "other")), list) == []
    assert batch.run_wide(counts, list) is batch.cached(counts, list)  # a lone batch's run


def test_rubric_metrics_of_one_judge_share_one_prepared_value(server: JudgeServer,
                                                             tmp_path: Path) -> None:
    judge = keyed_options(server, tmp_path / "c.sqlite")
    faithfulness, correctness = (create(name, ScoreOptions(judge=judge))
                                 for name in ("judge:faithfulness", "judge:correctness"))
    assert isinstance(faithfulness, JudgeMetric) and isinstance(correctness, JudgeMetric)
    batch = Batch(load_records(fact_records(tmp_path / "r.jsonl", 3, reference=True)))
    batch.cached(GROUP, list)[:] = [faithfulness, correctness]  # as the run hooks do

    prepared = correctness.prepare(batch)
    assert isinstance(prepared, SharedReplies)
    assert set(prepared.units) == {"judge:faithfulness", "judge:correctness"}
    assert server.requests == 6 and len(prepared.replies) == 6  # both rubrics, one stream
    assert faithfulness.prepare(batch) is prepared  # read, not gathered again
    assert server.requests == 6

    share = faithfulness.batch_replies(batch)
    assert isinstance(share, BatchReplies)
    assert [u.record for u in share.units] == [0, 1, 2]
    assert all(share.replies[u.key].text for u in share.units)
    assert {u.key for u in share.units}.isdisjoint(
        u.key for u in correctness.batch_replies(batch).units)
    result = faithfulness.score(batch)
    assert server.requests == 6 and all(r is None for r in result.reasons)


def test_a_metric_outside_a_run_prepares_its_own(server: JudgeServer, tmp_path: Path) -> None:
    judge = keyed_options(server, tmp_path / "c.sqlite")
    metric = create("judge:faithfulness", ScoreOptions(judge=judge))
    assert isinstance(metric, JudgeMetric)
    records = fact_records(tmp_path / "r.jsonl", 3, reference=True)
    prepared = metric.prepare(Batch(load_records(records)))
    assert set(prepared.units) == {"judge:faithfulness"} and server.requests == 3


def test_a_stopped_rounds_failures_are_counted_by_the_stats() -> None:
    request = JudgeRequest([{"role": "user", "content": "q"}])
    stats = RunStats(failed=2)
    stats.add_failures([JudgeResult(0, request, "ok"), None,
                        JudgeResult(2, request, None, error="HTTP 503"),
                        JudgeResult(3, request, None, error="timed out")])
    assert stats.failed == 4
