"""The kinds of run that once read every record as one window stream window by window: a
run cut into many small windows gives the records, summary and manifest of the run read as one
window. BERTScore's idf from a pass over the references before scoring (read twice from a
file; one window from a pipe); the claim-level metrics with their manifest section summed
window by window; the judge's judgments (``judgments_from="judge"``) filled window by window."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judge" / "claims"))

from judge_server import JudgeServer
from test_claim_metrics import ALL, RECORDS, judge
from test_claim_metrics import write_records as write_claim_records
from test_streaming import _WindowHooks, comparable, write_records

from rageval.api import evaluate
from rageval.core.metric import Batch, Metric, MetricResult
from rageval.core.records import load_records
from rageval.generation.bertscore import weights

IDF = ["bertscore(idf=true)", "bertscore"]


class _Spy(Metric):
    """Scores nothing of note; its hooks tell how the run was cut."""

    family = "retrieval"
    base = "spy"
    summary = "how the run was cut"
    hooks = _WindowHooks()  # counts the records of each window the run prepares

    def score(self, batch: Batch) -> MetricResult:
        return MetricResult({"spy": np.ones(len(batch))}, [None] * len(batch))


def windows_of(run: Any) -> list[int]:
    _WindowHooks.seen.clear()
    run()
    return list(_WindowHooks.seen)


def test_idf_streams_with_the_one_window_numbers(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The same embeddings and batches for both (an embedding is a few 1e-8 apart with the
    texts embedded beside it, a match 1e-16 with the pairs matched beside it, whatever the
    weights): the numbers then agree to the last bit."""
    path = write_records(tmp_path / "r.jsonl", 11, seed=1)
    cache = str(tmp_path / "embeddings")
    one = evaluate(load_records(path), [*IDF, _Spy()], bootstrap=30, batch_size=3,
                   embedding_cache=cache)
    passes: list[int] = []
    add = weights.DocumentFrequencies.add
    monkeypatch.setattr(weights.DocumentFrequencies, "add",
                        lambda self, records: (passes.append(len(records)), add(self, records)))
    runs: list[Any] = []
    seen = windows_of(lambda: runs.append(evaluate(
        path, [*IDF, _Spy()], bootstrap=30, window=3, batch_size=3, embedding_cache=cache)))
    assert seen == [3, 3, 3, 2]  # scored window by window...
    assert passes == [3, 3, 3, 2]  # ...after a pass that counted every window's references
    rows, summary, manifest = comparable(runs[0])
    one_rows, one_summary, one_manifest = comparable(one)
    assert rows == one_rows
    assert summary == one_summary
    one_manifest["records"]["source"] = manifest["records"]["source"]
    assert manifest == one_manifest


def test_idf_from_a_pipe_is_read_as_one_window(tmp_path: Path) -> None:
    """A pipe cannot be read twice: the run keeps every record in one window. Both runs embed
    their texts in the same batches (two records a batch, as the file's two-record windows
    cut them), so their numbers agree to the last bit: texts embedded beside other texts
    differ near the 7th decimal, within BERTScore's documented 1e-6 and no closer."""
    path = write_records(tmp_path / "r.jsonl", 7, seed=2)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    feeder = threading.Thread(target=lambda: fifo.write_bytes(path.read_bytes()))
    feeder.start()
    runs: list[Any] = []
    seen = windows_of(lambda: runs.append(evaluate(
        fifo, [*IDF, _Spy()], bootstrap=30, window=2, batch_size=2, embedding_cache="none")))
    feeder.join()
    assert seen == [7]
    held = evaluate(path, [*IDF, _Spy()], bootstrap=30, window=2, batch_size=2,
                    embedding_cache="none")
    assert comparable(runs[0])[:2] == comparable(held)[:2]


# ---- the claim-level metrics ------------------------------------------------------------


def online_twice(tmp_path: Path, windows: tuple[int, int], section: str,
                 score: Callable[..., Any]) -> tuple[Any, Any, Any, int]:
    """``score(window=..., judge=...)`` with the loopback judge, read as one window and as
    many, each with a cache of its own: both runs, their comparable parts (cache paths aside)
    and the requests the judge got."""
    runs: dict[str, Any] = {}
    with JudgeServer() as server:
        for name, window in zip(("one", "many"), windows, strict=True):
            runs[name] = score(window=window, judge=judge(server, tmp_path / f"{name}.sqlite"))
        asked = server.requests
    one, many = comparable(runs["one"]), comparable(runs["many"])
    for manifest in (one[2], many[2]):
        manifest[section]["cache"].pop("path")
    return runs["one"], one, many, asked


def test_claim_level_metrics_stream_with_one_account(tmp_path: Path) -> None:
    """Records that share no text: two records asking the same request in one window ask it
    once, in two windows once and then from the cache (a hit more, and ``cached`` details)."""
    path = write_claim_records(tmp_path / "r.jsonl", RECORDS)
    first, one, many, asked = online_twice(
        tmp_path, (4, 1), "claims",
        lambda **kw: evaluate(path, [*ALL, _Spy()], bootstrap=30, **kw))
    assert many == one
    assert asked == 2 * one[2]["claims"]["requests"] > 0
    # Replayed from the cache, as one window and as windows of two (batches of one).
    replay = judge(None, tmp_path / "many.sqlite", offline=True)
    held = evaluate(path, [*ALL, _Spy()], bootstrap=30, window=4, judge=replay)
    again: list[Any] = []
    seen = windows_of(lambda: again.append(evaluate(
        path, [*ALL, _Spy()], bootstrap=30, window=2, batch_size=1, judge=replay)))
    assert seen == [2, 2]
    assert comparable(again[0]) == comparable(held)
    assert [r.scores for r in held.records] == [r.scores for r in first.records]
    assert held.manifest["claims"]["cache"]["hits"] == one[2]["claims"]["requests"] + 1


# ---- judgments from the judge -------------------------------------------------------------


def test_judged_judgments_fill_window_by_window(tmp_path: Path) -> None:
    """Qrels that only the last window's records match: the run signs as the one window
    does (``qrels+judge/...``), with one account of what the judge graded."""
    lines = write_records(tmp_path / "r.jsonl", 8, seed=3).read_text().splitlines()
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items()
                                        if k != "judgments"}) + "\n" for line in lines))
    records = load_records(path)
    qrels = {r.id: {r.contexts[0].id: 2} for r in records[6:]}
    metrics = ["ndcg@3", "map", _Spy()]
    first, one, many, asked = online_twice(
        tmp_path, (8, 3), "judge",
        lambda **kw: evaluate(path, metrics, qrels=qrels, judgments_from="judge",
                              bootstrap=30, batch_size=2, **kw))
    assert many == one
    assert one[2]["judged_judgments"]["records_graded"] == 6
    assert "judgments:qrels+judge/" in first.summary["map"].signature
    assert asked == 2 * sum(len(r.contexts) for r in records[:6])
    replay = judge(None, tmp_path / "many.sqlite", offline=True)
    held = evaluate(path, metrics, qrels=qrels, judgments_from="judge", bootstrap=30,
                    batch_size=2, judge=replay)
    again: list[Any] = []
    seen = windows_of(lambda: again.append(evaluate(
        path, metrics, qrels=qrels, judgments_from="judge", bootstrap=30, window=3,
        batch_size=2, judge=replay)))
    assert seen == [3, 3, 2]
    assert comparable(again[0]) == comparable(held)
    assert [r.scores for r in held.records] == [r.scores for r in first.records]
