"""Progress that tells the truth: the loading hook (JSONL, JSON, CSV, Parquet), the judge's
snapshots (rubric and claim-level, online and from the cache), BERTScore's embedding step, the
CLI's bars and its final line."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.cli import main
from rageval.cli.progress import Hooks, final_line, progress_bars
from rageval.core.metric import ScoreOptions
from rageval.core.records import Record, load_records, records_from_dicts
from rageval.core.registry import create
from rageval.core.results import Results
from rageval.judge.llm.options import JudgeOptions, JudgeProgress

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"
PASSAGE = "The quarterly report lists revenue, margins and the outlook for next year. " * 3


def _items(n: int) -> list[dict[str, Any]]:
    return [{"id": f"q{i}", "query": f"What is item {i}?",
             "contexts": [{"id": f"d{i}", "text": PASSAGE}, {"id": f"e{i}", "text": "Other."}],
             "answer": f"Item {i} is a thing.", "reference": f"Item {i}."} for i in range(n)]


def _calls() -> tuple[list[tuple[int, int | None]], Any]:
    seen: list[tuple[int, int | None]] = []
    return seen, lambda done, total: seen.append((done, total))


def _check_counts(seen: list[tuple[int, int | None]], total: int, several: bool) -> None:
    """Monotone counts under one total, the last equal to it."""
    assert seen, "progress was never told"
    dones = [done for done, _ in seen]
    assert dones == sorted(dones)
    assert {t for _, t in seen} == {total}
    assert seen[-1] == (total, total)
    if several:
        assert len(seen) > 2  # told along the way, not only at the end


# ---- loading ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many() -> list[dict[str, Any]]:
    return _items(12_000)  # about 5 MB of JSONL: several reports a MiB apart


def test_jsonl_reports_bytes_read(tmp_path: Path, many: list[dict[str, Any]]) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in many), encoding="utf-8")
    seen, hook = _calls()
    loaded = load_records(path, progress=hook)
    _check_counts(seen, path.stat().st_size, several=True)
    assert len(seen) < len(many) / 1000  # every MiB or so, never per record
    assert loaded == load_records(path)  # the hook changes nothing read


def test_json_array_reports_characters_parsed(tmp_path: Path,
                                              many: list[dict[str, Any]]) -> None:
    path = tmp_path / "r.json"
    text = json.dumps(many, indent=1)
    path.write_text(text, encoding="utf-8")
    seen, hook = _calls()
    assert len(load_records(path, progress=hook)) == len(many)
    _check_counts(seen, len(text), several=True)


def test_csv_reports_bytes_read(tmp_path: Path, many: list[dict[str, Any]]) -> None:
    path = tmp_path / "r.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "query", "answer", "reference", "contexts"])
        for item in many:
            writer.writerow([item["id"], item["query"], item["answer"], item["reference"],
                             json.dumps(item["contexts"])])
    seen, hook = _calls()
    loaded = load_records(path, progress=hook)
    assert len(loaded) == len(many)
    _check_counts(seen, path.stat().st_size, several=True)


def test_parquet_reports_rows(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    rows = 20_000  # three slices of 8192 rows
    path = tmp_path / "r.parquet"
    pl.DataFrame({"id": [f"q{i}" for i in range(rows)],
                  "answer": ["yes"] * rows}).write_parquet(path)
    seen, hook = _calls()
    assert len(load_records(path, progress=hook)) == rows
    _check_counts(seen, rows, several=True)


def test_small_file_reports_once_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in _items(3)), encoding="utf-8")
    seen, hook = _calls()
    evaluate(path, ["rouge1"], load_progress=hook, bootstrap=1)
    assert seen == [(path.stat().st_size, path.stat().st_size)]


# ---- the run options --------------------------------------------------------------------


def test_steps_hook_is_no_part_of_a_metric() -> None:
    def hook(step: str, done: int, total: int | None, info: str) -> None: ...

    plain, hooked = ScoreOptions(), ScoreOptions(steps=hook)
    assert plain == hooked and hash(plain) == hash(hooked)
    assert create("ndcg@10", hooked) == create("ndcg@10", plain)
    assert create("ndcg@10", hooked).signature() == create("ndcg@10", plain).signature()
    assert create("ndcg@10").with_options(hooked).options.steps is hook


# ---- the judge --------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


def _judge(server: JudgeServer, tmp_path: Path, seen: list[JudgeProgress],
           **kw: Any) -> JudgeOptions:
    return JudgeOptions(model="judge-model", base_url=server.base_url, timeout=5.0,
                        max_retries=0, cache=str(tmp_path / "cache.sqlite"),
                        progress=seen.append, **kw)


def _latest(seen: list[JudgeProgress]) -> dict[int, JudgeProgress]:
    """The last snapshot of each account, checking that no count of an account goes down."""
    last: dict[int, JudgeProgress] = {}
    for snap in seen:
        before = last.get(snap.account)
        if before is not None:
            for name in ("done", "total", "failed", "tokens", "hits", "cached_tokens"):
                assert getattr(snap, name) >= getattr(before, name), (name, before, snap)
        assert snap.done <= snap.total
        last[snap.account] = snap
    return last


def _sections(results: Results) -> list[dict[str, Any]]:
    return [results.manifest[k] for k in ("judge", "claims") if k in results.manifest]


def _check_against_manifest(seen: list[JudgeProgress], results: Results) -> None:
    """What the snapshots add up to is what the manifest accounts for."""
    last = _latest(seen).values()
    sections = _sections(results)
    assert sum(p.done for p in last) == sum(p.total for p in last)  # every request finished
    assert sum(p.done for p in last) == sum(s["requests"] for s in sections)
    assert sum(p.hits for p in last) == sum(s["cache"]["hits"] for s in sections)
    assert sum(p.tokens for p in last) == sum(s["usage"]["total_tokens"] for s in sections)
    assert sum(p.cached_tokens for p in last) == sum(s["cached_usage"]["total_tokens"]
                                                     for s in sections)


def test_judge_requests_then_cache_hits(tmp_path: Path, server: JudgeServer) -> None:
    recs = records_from_dicts(_items(6))
    seen: list[JudgeProgress] = []
    first = evaluate(recs, ["judge:fluency"], judge=_judge(server, tmp_path, seen,
                                                           price_in=2.0, price_out=8.0),
                     bootstrap=1, batch_size=2)
    _check_against_manifest(seen, first)
    last = seen[-1]
    assert (last.done, last.total, last.hits, last.failed) == (6, 6, 0, 0)
    assert last.tokens > 0 and last.cost_usd == first.manifest["judge"]["cost_usd"]["this_run"]
    assert [s.done for s in seen] == [0, 1, 2, 3, 4, 5, 6]  # the cache, then each reply

    seen.clear()
    again = evaluate(recs, ["judge:fluency"], judge=_judge(server, tmp_path, seen),
                     bootstrap=1)
    assert server.requests == 6  # all from the cache
    _check_against_manifest(seen, again)
    assert [(s.done, s.total, s.hits) for s in seen] == [(0, 0, 6)]
    assert seen[0].cached_tokens == last.tokens and seen[0].cost_usd is None


def test_judge_failures_are_counted(tmp_path: Path, server: JudgeServer) -> None:
    server.fail_next("500")  # passing, but max_retries=0: failed for good
    seen: list[JudgeProgress] = []
    results = evaluate(records_from_dicts(_items(3)), ["judge:fluency"],
                       judge=_judge(server, tmp_path, seen, concurrency=1), bootstrap=1)
    _check_against_manifest(seen, results)
    assert seen[-1].failed == results.manifest["judge"]["failed"] == 1


def test_claim_level_judging_reports_through_the_same_path(tmp_path: Path,
                                                            server: JudgeServer) -> None:
    recs = records_from_dicts(_items(3))
    metrics = ["claims:precision", "judge:fluency"]
    seen: list[JudgeProgress] = []
    first = evaluate(recs, metrics, judge=_judge(server, tmp_path, seen), bootstrap=1)
    _check_against_manifest(seen, first)
    assert len(_latest(seen)) == 2  # the rubric judge's account and the claims'
    assert sum(p.done for p in _latest(seen).values()) == server.requests

    seen.clear()  # a replay: the claims' checks read the cache too, and must not count twice
    again = evaluate(recs, metrics, judge=_judge(server, tmp_path, seen), bootstrap=1)
    _check_against_manifest(seen, again)
    assert sum(p.hits for p in _latest(seen).values()) == server.requests


# ---- BERTScore --------------------------------------------------------------------------


def _bertscore_records() -> list[Record]:
    pairs = [("The cat sat on the mat.", "A cat was sitting on a mat."),
             ("Revenue grew in the third quarter.", "Revenue increased in Q3."),
             ("Paris", "The capital of France is Paris."),
             ("The cat sat on the mat.", "Revenue increased in Q3."),  # texts seen before
             ("yes", "no")]
    return [Record(id=f"r{i}", answer=a, references=(r,)) for i, (a, r) in enumerate(pairs)]


def test_bertscore_embedding_step(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import rageval.generation.bertscore as bs

    bs.clear_memory_cache()
    records = _bertscore_records()
    texts = len({t for r in records for t in (r.answer, *r.references)})
    seen: list[tuple[str, int, int | None, str]] = []

    def steps(step: str, done: int, total: int | None, info: str) -> None:
        seen.append((step, done, total, info))

    metrics = [f"bertscore(cache={tmp_path},batch_size=2)", f"bertscore(idf=true,cache={tmp_path})"]
    evaluate(records, metrics, steps=steps, batch_size=2, bootstrap=1)
    assert {s[0] for s in seen} == {"bertscore embedding (all-MiniLM-L6-v2)"}
    _check_counts([(done, total) for _, done, total, _ in seen], texts, several=True)

    seen.clear()
    bs.clear_memory_cache()  # a second run: every embedding from the disk cache, and a
    built = create(metrics[0])  # metric object built without the hook gets the run's
    evaluate(records, [built], steps=steps, batch_size=2, bootstrap=1)
    _check_counts([(done, total) for _, done, total, _ in seen], texts, several=False)
    assert seen[-1][3] == f"{texts:,} from cache"


# ---- the final line and the CLI ---------------------------------------------------------


def test_final_line_accounts_for_the_run() -> None:
    section = {"requests": 0, "failed": 0, "cache": {"hits": 40},
               "usage": {"total_tokens": 0}, "cached_usage": {"total_tokens": 28_177}}
    manifest = {"records": {"count": 8}, "metrics": [f"m{i}" for i in range(21)],
                "wall_time_s": 4.712, "judge": section}
    assert final_line(Results([], {}, manifest)) == (
        "8 records · 21 metrics · 4.7 s · judge: 0 requests, 40 cache hits, "
        "28,177 tokens replayed")
    claims = {"requests": 5, "failed": 1, "cache": {"hits": 1},
              "usage": {"total_tokens": 1_200}, "cached_usage": {"total_tokens": 0},
              "cost_usd": {"this_run": 0.0123}}
    manifest = {**manifest, "metrics": ["m"], "claims": claims}
    assert final_line(Results([], {}, manifest)) == (
        "8 records · 1 metric · 4.7 s · judge: 5 requests, 41 cache hits, 1 failed, "
        "1,200 tokens, 28,177 tokens replayed, $0.0123 spent")
    plain = {"records": {"count": 1}, "metrics": ["mrr"], "wall_time_s": 0.01}
    assert final_line(Results([], {}, plain)) == "1 record · 1 metric · 0.0 s"


def test_bars_off_give_no_hooks() -> None:
    with progress_bars(False) as hooks:
        assert hooks == Hooks()


def test_cli_progress_prints_the_final_line_on_stderr(tmp_path: Path, capsys) -> None:
    out = io.StringIO()
    assert main(["score", str(DEMO), "-m", "mrr", "-m", "rouge1", "--progress"],
                stdout=out) == 0
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("8 records · 2 metrics · ") and last.endswith(" s")
    assert "records ·" not in out.getvalue() and "mrr" in out.getvalue()

    assert main(["score", str(DEMO), "-m", "mrr", "--no-progress"], stdout=io.StringIO()) == 0
    assert "records ·" not in capsys.readouterr().err


def test_cli_final_line_counts_the_judge(tmp_path: Path, capsys, server: JudgeServer) -> None:
    argv = ["score", str(DEMO), "-m", "judge:fluency", "--judge-model", "judge-model",
            "--judge-base-url", server.base_url, "--cache", str(tmp_path / "c.sqlite"),
            "--progress"]
    assert main(argv, stdout=io.StringIO()) == 0
    assert "judge: 8 requests, 0 cache hits, " in capsys.readouterr().err
    assert main(argv, stdout=io.StringIO()) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "judge: 0 requests, 8 cache hits, " in last and "tokens replayed" in last
