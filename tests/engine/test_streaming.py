"""A records file scored window by window: the same values, summary and signatures as the run
held in memory, whatever the window; per-record results written as they finish, atomically as
a run; checks over the whole run still made."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import InputError, UsageError
from rageval.core.metric import Batch, Metric, MetricResult, RunHooks
from rageval.core.records import iter_windows, load_records
from rageval.core.results import Results
from rageval.core.results.run_records import RecordsFile
from rageval.judge.llm.options import JudgeOptions

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"
LEXICAL = ["ndcg@3", "map", "mrr", "p@2", "rouge1", "rougeL", "bleu", "bleu(smooth=floor)"]
KEY = "sk-stream-test-0123456789"
ENV = "RAGEVAL_TEST_STREAM_KEY"


def comparable(results: Results) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """Everything a run produced but when it ran and how long it took."""
    manifest = {k: v for k, v in results.manifest.items() if k not in ("created", "wall_time_s")}
    summary = {name: item.to_json() for name, item in results.summary.items()}
    return [r.to_json() for r in results.records], summary, manifest


def write_records(path: Path, count: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)]
    lines = []
    for i in range(count):
        docs = [f"d{i}-{r}" for r in range(4)]
        lines.append(json.dumps({
            "id": f"q{i}",
            "query": f"question {i}",
            "contexts": [{"id": d, "text": " ".join(rng.choice(words, 6))} for d in docs],
            "answer": " ".join(rng.choice(words, int(rng.integers(1, 12)))),
            "reference": " ".join(rng.choice(words, int(rng.integers(1, 12)))),
            "judgments": {d: int(rng.integers(0, 3)) for d in docs[: int(rng.integers(0, 4))]},
        }))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_iter_windows_reads_the_file_in_order() -> None:
    windows = list(iter_windows(DEMO, 3))
    assert [len(w) for w in windows[:-1]] == [3] * (len(windows) - 1)
    assert [r.id for w in windows for r in w] == [r.id for r in load_records(DEMO)]
    with pytest.raises(UsageError, match="window size"):
        iter_windows(DEMO, 0)


@pytest.mark.parametrize("window", [1, 2, 3, 7])
def test_any_window_gives_the_run_held_in_memory(window: int) -> None:
    held = evaluate(load_records(DEMO), LEXICAL, bootstrap=200, seed=5)
    streamed = evaluate(DEMO, LEXICAL, bootstrap=200, seed=5, window=window)
    held_rows, held_summary, held_manifest = comparable(held)
    rows, summary, manifest = comparable(streamed)
    assert rows == held_rows
    assert summary == held_summary
    held_manifest["records"]["source"] = manifest["records"]["source"]
    assert manifest == held_manifest


@settings(max_examples=15, deadline=None)
@given(count=st.integers(1, 40), window=st.integers(1, 45), seed=st.integers(0, 3))
def test_values_never_depend_on_the_window(tmp_path_factory: pytest.TempPathFactory,
                                           count: int, window: int, seed: int) -> None:
    path = write_records(tmp_path_factory.mktemp("w") / "r.jsonl", count, seed)
    whole = evaluate(path, LEXICAL, bootstrap=50, window=count)
    parts = evaluate(path, LEXICAL, bootstrap=50, window=window)
    assert comparable(parts) == comparable(whole)


def test_out_writes_the_run_as_it_goes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    results = evaluate(DEMO, LEXICAL, bootstrap=100, window=2, out=out)
    assert isinstance(results.records, RecordsFile)
    assert sorted(p.name for p in out.iterdir()) == ["records.jsonl", "summary.json"]
    loaded = Results.load(out)  # the digest in summary.json matches records.jsonl
    assert [r.to_json() for r in loaded.records] == [r.to_json() for r in results.records]
    held = evaluate(DEMO, LEXICAL, bootstrap=100)
    held.write(tmp_path / "held")
    assert ((tmp_path / "held" / "records.jsonl").read_bytes()
            == (out / "records.jsonl").read_bytes())
    assert len(results.records) == len(load_records(DEMO))
    assert results.records[0].id == load_records(DEMO)[0].id
    copied = results.write(tmp_path / "copy")  # a streamed run copies over with its digest
    assert Results.load(copied).summary == loaded.summary


class _Boom(Metric):
    """Fails on the record ``fail_on``: a run that dies half way."""

    family = "retrieval"
    base = "boom"
    summary = "fails on one record"
    fail_on: ClassVar[str] = "q7"

    def score(self, batch: Batch) -> MetricResult:
        if any(r.id == self.fail_on for r in batch.records):
            raise RuntimeError("killed half way")
        return MetricResult({"boom": np.ones(len(batch))}, [None] * len(batch))


def test_a_run_that_dies_leaves_no_output_and_keeps_the_last(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", 12)
    out = tmp_path / "run"
    evaluate(path, ["map"], bootstrap=10, out=out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(RuntimeError, match="half way"):
        evaluate(path, ["map", _Boom()], bootstrap=10, window=3, batch_size=2, out=out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no partial file left
    Results.load(out)


def test_a_field_no_window_has_is_an_error_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "answer": "a", "reference": "a",
                                        "contexts": ["d"], "judgements": {"d": 1}}) + "\n"
                            for i in range(5)))
    out = tmp_path / "run"
    with pytest.raises(UsageError, match=r"needs 'judgments'.*judgements"):
        evaluate(path, ["rouge1", "map"], window=2, out=out)
    assert not out.exists() or not any(out.iterdir())


def test_qrels_sign_as_the_whole_run_read(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", 9)
    records = load_records(path)
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({"id": r.id, "contexts": [c.id for c in r.contexts]})
                            + "\n" for r in records))
    qrels = {r.id: {c.id: 1 for c in r.contexts[:2]} for r in records[4:]}
    held = evaluate(load_records(bare), ["map"], qrels=qrels, bootstrap=20)
    streamed = evaluate(bare, ["map"], qrels=qrels, bootstrap=20, window=2)
    assert comparable(streamed)[1] == comparable(held)[1]
    assert "judgments:qrels" in streamed.summary["map"].signature
    with pytest.raises(InputError, match="no query id of the qrels"):
        evaluate(bare, ["map"], qrels={"nobody": {"d": 1}}, window=2, out=tmp_path / "x")
    assert not (tmp_path / "x" / "summary.json").exists()


class _WindowHooks(RunHooks):
    section = "windows_seen"
    seen: ClassVar[list[int]] = []

    def prepare(self, run: Batch, metrics: Sequence[Metric]) -> None:
        self.seen.append(len(run.records))


class _Whole(Metric):
    """Needs every record at once."""

    family = "retrieval"
    base = "whole"
    summary = "needs the whole run"
    hooks = _WindowHooks()

    def streams(self) -> bool:
        return False

    def score(self, batch: Batch) -> MetricResult:
        return MetricResult({"whole": np.full(len(batch), float(len(batch.run.records)))},
                            [None] * len(batch))


def test_a_metric_that_needs_the_whole_run_gets_one_window(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", 10)
    _WindowHooks.seen.clear()
    results = evaluate(path, [_Whole(), "map"], window=3, bootstrap=10)
    assert _WindowHooks.seen == [10]
    assert results.summary["whole"].value == 10.0


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(ENV, KEY)
    with JudgeServer(expected_key=KEY) as s:
        yield s


def test_the_judge_streams_with_one_account(tmp_path: Path, server: JudgeServer) -> None:
    path = write_records(tmp_path / "r.jsonl", 7)
    judge = JudgeOptions(model="judge-model", cache=str(tmp_path / "c.sqlite"),
                         api_key_env=ENV, base_url=server.base_url, timeout=5.0,
                         max_retries=1)
    metrics = ["judge:faithfulness", "map"]
    streamed = evaluate(path, metrics, judge=judge, bootstrap=20, window=3)
    assert server.requests == 7
    replay = JudgeOptions(model="judge-model", cache=str(tmp_path / "c.sqlite"), offline=True)
    held = evaluate(load_records(path), metrics, judge=replay, bootstrap=20)
    rows, summary, _ = comparable(streamed)
    held_rows, held_summary, _ = comparable(held)
    assert summary["judge:faithfulness"]["value"] == held_summary["judge:faithfulness"]["value"]
    assert [r["scores"] for r in rows] == [r["scores"] for r in held_rows]
    assert streamed.manifest["judge"]["requests"] == 7  # one account over every window


def test_cli_window_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["score", str(DEMO), "-m", "map", "-m", "rouge1", "--no-progress", "--bootstrap",
            "50"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--window", "2"]) == 0
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert ((tmp_path / "a" / "records.jsonl").read_bytes()
            == (tmp_path / "b" / "records.jsonl").read_bytes())
    assert main([*argv, "--window", "0"]) == 2
    assert "window size" in capsys.readouterr().err


def test_records_file_reads_lazily(tmp_path: Path) -> None:
    out = tmp_path / "run"
    results = evaluate(DEMO, ["map"], bootstrap=10, window=4, out=out)
    frame = results.to_polars()
    assert frame.height == len(load_records(DEMO))
    assert isinstance(results.records[1:3], list)


def test_a_later_run_in_the_same_directory_never_passes_for_this_one(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = evaluate(write_records(tmp_path / "a.jsonl", 12), ["map"], bootstrap=10, out=out)
    evaluate(write_records(tmp_path / "b.jsonl", 7, seed=1), ["map"], bootstrap=10, out=out)
    with pytest.raises(InputError, match="no longer the one this run wrote"):
        next(iter(first.records))  # refused before a line of the other run is read
    with pytest.raises(InputError, match="no longer the one this run wrote"):
        first.write(tmp_path / "copy")
    second = Results.load(out)
    with pytest.raises(InputError, match="no longer the one this run wrote"):
        first.write(out)  # the other run's pair there is left as it was
    assert Results.load(out).summary == second.summary
    assert not (tmp_path / "copy").exists()  # a refused write leaves nothing behind


class _Seen(Metric):
    """Remembers the records it scored."""

    family = "retrieval"
    base = "seen"
    summary = "records scored"
    scored: ClassVar[list[str]] = []

    def score(self, batch: Batch) -> MetricResult:
        self.scored.extend(r.id for r in batch.records)
        return MetricResult({"seen": np.ones(len(batch))}, [None] * len(batch))


def test_a_duplicate_id_is_refused_before_its_window_is_scored(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", 10)
    lines = path.read_text().splitlines()
    lines[7] = lines[1]  # q1 again, on line 8
    path.write_text("\n".join(lines) + "\n")
    _Seen.scored.clear()
    with pytest.raises(InputError, match=r"duplicate record id 'q1' \(first used at line 2\)"):
        evaluate(path, [_Seen()], window=3, bootstrap=10)
    assert _Seen.scored == [f"q{i}" for i in range(6)]  # the windows before line 8's
