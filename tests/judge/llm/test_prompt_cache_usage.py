"""Provider prompt caching and reasoning tokens: what endpoints report of them is read into each
reply's usage (OpenAI's and vLLM's ``prompt_tokens_details.cached_tokens``, llama.cpp's
``timings.cache_n``, ``completion_tokens_details.reasoning_tokens``), kept in the cache, summed
for the run, priced with ``--judge-price-cached-in`` and shown in the manifest, the final line
and the progress snapshots."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.cli import main
from rageval.cli.progress import _Bars, final_line
from rageval.core.records import records_from_dicts
from rageval.judge.llm.cache.store import JudgeCache
from rageval.judge.llm.options import JudgeOptions, JudgeProgress
from rageval.judge.llm.transport.sdk import read_reply

METRICS = ["judge:faithfulness", "judge:correctness"]


def _reply(usage: Any, **more: Any) -> dict[str, Any]:
    return {"choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}],
            "usage": usage, **more}


OPENAI = {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
          "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
          "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0,
                                        "accepted_prediction_tokens": 0,
                                        "rejected_prediction_tokens": 0}}
VLLM = {"prompt_tokens": 900, "total_tokens": 950, "completion_tokens": 50,
        "prompt_tokens_details": {"cached_tokens": 768}}
LLAMA_SERVER_TIMINGS = {"cache_n": 512, "prompt_n": 88, "prompt_ms": 41.2,
                        "predicted_n": 40, "predicted_ms": 310.0}


@pytest.mark.parametrize(("reply", "expected"), [
    (_reply(OPENAI), {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                      "cached_prompt_tokens": 1920, "reasoning_tokens": 256}),
    (_reply(VLLM), {"prompt_tokens": 900, "completion_tokens": 50, "total_tokens": 950,
                    "cached_prompt_tokens": 768}),
    # vLLM without prefix caching: the details are null
    (_reply({**VLLM, "prompt_tokens_details": None}),
     {"prompt_tokens": 900, "completion_tokens": 50, "total_tokens": 950}),
    # llama.cpp's llama-server: the prompt cache in "timings", beside usage
    (_reply({"prompt_tokens": 600, "completion_tokens": 40, "total_tokens": 640},
            timings=LLAMA_SERVER_TIMINGS),
     {"prompt_tokens": 600, "completion_tokens": 40, "total_tokens": 640,
      "cached_prompt_tokens": 512}),
    # a recent llama-server reports both: the usage's details win
    (_reply({"prompt_tokens": 600, "completion_tokens": 40, "total_tokens": 640,
             "prompt_tokens_details": {"cached_tokens": 500}}, timings=LLAMA_SERVER_TIMINGS),
     {"prompt_tokens": 600, "completion_tokens": 40, "total_tokens": 640,
      "cached_prompt_tokens": 500}),
])
def test_usage_shapes_of_endpoints_are_read(reply: dict[str, Any],
                                            expected: dict[str, int]) -> None:
    assert read_reply(reply).usage == expected


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": "5"}},
    {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": -1}},
    {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": True}},
    {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 11}},  # more than the prompt
    {"prompt_tokens": 10, "prompt_tokens_details": [5]},
    {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 2.5}},
    {"prompt_tokens": 10, "completion_tokens_details": {"reasoning_tokens": None}},
    {"prompt_tokens": 10, "completion_tokens_details": "256"},
])
def test_absent_or_malformed_details_are_left_out(usage: dict[str, Any]) -> None:
    got = read_reply(_reply(usage)).usage
    assert got == {"prompt_tokens": 10}
    assert read_reply(_reply(usage, timings={"cache_n": "7"})).usage == {"prompt_tokens": 10}
    assert read_reply(_reply(usage, timings=[1])).usage == {"prompt_tokens": 10}


def test_negative_and_boolean_counts_are_left_out() -> None:
    usage = {"prompt_tokens": -3, "completion_tokens": True, "total_tokens": 4}
    assert read_reply(_reply(usage)).usage == {"total_tokens": 4}


def test_cost_prices_cached_prompt_tokens_and_counts_reasoning_once() -> None:
    usage = {"prompt_tokens": 1_000_000, "cached_prompt_tokens": 600_000,
             "completion_tokens": 200_000, "reasoning_tokens": 150_000}
    judge = JudgeOptions(model="m", price_in=2.0, price_out=8.0, price_cached_in=0.5)
    # 400k uncached at $2, 600k cached at $0.50, 200k completion (reasoning inside) at $8
    assert judge.cost_usd(usage) == pytest.approx(0.8 + 0.3 + 1.6)
    # no cached price: no discount
    plain = JudgeOptions(model="m", price_in=2.0, price_out=8.0)
    assert plain.cost_usd(usage) == pytest.approx(2.0 + 1.6)
    # an endpoint that reports no cache: as before
    assert judge.cost_usd({"prompt_tokens": 1_000_000, "completion_tokens": 0}) == 2.0
    assert JudgeOptions(model="m", price_cached_in=0.5).cost_usd(usage) is None


def test_a_bad_cached_price_is_a_usage_error_naming_the_flag(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"id": "a", "query": "q", "answer": "a"}) + "\n")
    code = main(["score", str(records), "-m", "judge:fluency", "--judge-model", "m",
                 "--judge-price-in", "1", "--judge-price-cached-in", "-1",
                 "--cache", str(tmp_path / "c.sqlite")], stdout=io.StringIO())
    assert code == 2
    assert "--judge-price-cached-in must be a non-negative price" in capsys.readouterr().err


def _records(n: int) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "query": f"What happened to revenue in year {i}?",
             "contexts": [f"In year {i} revenue grew by {i % 9} percent.",
                          f"Year {i} also saw {i % 4} new offices."],
             "answer": f"Revenue grew {i % 9} percent in year {i}.",
             "reference": f"It grew by {i % 9} percent."} for i in range(n)]


def test_a_run_accounts_for_the_prompt_cache(tmp_path: Path) -> None:
    seen: list[JudgeProgress] = []
    with JudgeServer() as server:
        server.cache_prefixes(128)
        judge = JudgeOptions(model="m", base_url=server.base_url, timeout=5.0,
                             cache=str(tmp_path / "c.sqlite"), concurrency=1, max_retries=0,
                             price_in=2.0, price_out=8.0, price_cached_in=0.2,
                             progress=seen.append)
        results = evaluate(records_from_dicts(_records(12)), METRICS, judge=judge, bootstrap=1)
        served_prompt = sum(p for p, _ in server.prompt_cache_usage)
        served_cached = sum(c for _, c in server.prompt_cache_usage)
    section = results.manifest["judge"]
    usage = section["usage"]
    assert (usage["prompt_tokens"], usage["cached_prompt_tokens"]) == (served_prompt,
                                                                       served_cached)
    assert section["prompt_cache"] == {"cached_prompt_tokens": served_cached,
                                       "prompt_tokens": served_prompt,
                                       "share": round(served_cached / served_prompt, 4)}
    assert section["prompt_cache"]["share"] > 0.5
    assert section["cost_usd"]["price_cached_in_per_mtok"] == 0.2
    expected = ((served_prompt - served_cached) * 2.0 + served_cached * 0.2
                + usage["completion_tokens"] * 8.0) / 1e6
    assert section["cost_usd"]["this_run"] == pytest.approx(expected, abs=1e-6)
    assert seen[-1].cached_prompt_tokens == served_cached
    assert f"{served_cached:,} tokens from the prompt cache (" in final_line(results)

    # the cache keeps what the endpoint reported: a replay shows it as replayed
    with JudgeCache(tmp_path / "c.sqlite") as store:
        kept = sum(e.usage.get("cached_prompt_tokens", 0) for e in store.entries())
    assert kept == served_cached
    replay = evaluate(records_from_dicts(_records(12)), METRICS, bootstrap=1,
                      judge=JudgeOptions(model="m", cache=str(tmp_path / "c.sqlite"),
                                         offline=True))
    assert replay.manifest["judge"]["cached_usage"]["cached_prompt_tokens"] == served_cached
    assert "prompt_cache" not in replay.manifest["judge"]  # nothing was asked this run


def test_an_endpoint_that_reports_no_cache_shows_none(tmp_path: Path) -> None:
    with JudgeServer() as server:
        judge = JudgeOptions(model="m", base_url=server.base_url, timeout=5.0,
                             cache=str(tmp_path / "c.sqlite"), max_retries=0)
        results = evaluate(records_from_dicts(_records(2)), METRICS, judge=judge, bootstrap=1)
    section = results.manifest["judge"]
    assert "cached_prompt_tokens" not in section["usage"] and "prompt_cache" not in section
    assert "prompt cache" not in final_line(results)


def test_final_line_and_judge_bar_show_the_prompt_cache_and_reasoning() -> None:
    from rageval.core.results import Results

    section = {"requests": 4, "failed": 0, "cache": {"hits": 0},
               "usage": {"prompt_tokens": 4_000, "completion_tokens": 400,
                         "total_tokens": 4_400, "cached_prompt_tokens": 3_072,
                         "reasoning_tokens": 128},
               "cached_usage": {"total_tokens": 0}}
    manifest = {"records": {"count": 2}, "metrics": ["m"], "wall_time_s": 1.0,
                "judge": section}
    assert final_line(Results([], {}, manifest)) == (
        "2 records · 1 metric · 1.0 s · judge: 4 requests, 0 cache hits, 4,400 tokens, "
        "3,072 tokens from the prompt cache (77% of prompt tokens), 128 reasoning")

    class Bar:
        def __init__(self) -> None:
            self.fields: dict[str, Any] = {}

        def add_task(self, name: str, **fields: Any) -> str:
            return name

        def update(self, task: str, **fields: Any) -> None:
            self.fields = fields

    bar = Bar()
    bars = _Bars(bar)  # type: ignore[arg-type]
    bars.judge(JudgeProgress(4, 4, 0, 4_400, cached_prompt_tokens=3_072, reasoning_tokens=128,
                             prompt_tokens=4_000, account=1))
    assert bar.fields["extra"] == ("0 cache hits · 0 failed · 4,400 tokens · 3,072 tokens "
                                   "from the prompt cache (77% of prompt tokens) · 128 "
                                   "reasoning")
    # A pending batch's note quotes the provider (its batch id and status): shown safe.
    bars.judge(JudgeProgress(0, 4, 0, 0, account=2,
                             note="batch b\x1b]0;owned\x07: in_progress\n::error::x"))
    shown = bar.fields["extra"]
    assert "\x1b" not in shown and "\x07" not in shown and "\n" not in shown
    assert "::error::" not in shown
