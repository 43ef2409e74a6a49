"""The judge against llama.cpp's own ``llama-server`` (``rageval local-judge --engine
llama-server``), serving the same SmolLM2 GGUF as the llama-cpp-python tests: it takes OpenAI's
``json_schema`` (llama-cpp-python's server refuses it), an over-long prompt fails that request
only in llama-server's own words, and an offline replay reproduces every number with no request.
Skipped, with the reason, where no llama-server is built (``python -m
rageval.judge.local.llama_server``); CI builds it, and with ``CI=true`` a missing one fails."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_local_judge import RECORDS, _assert_judged, _assert_same, _judge, _replay, _write

from rageval.api import evaluate
from rageval.core.errors import UsageError

pytestmark = pytest.mark.real_model


def _need_llama_server() -> None:
    from rageval.judge.local import find_llama_server

    try:
        find_llama_server(None)
    except UsageError as exc:
        if os.environ.get("CI") == "true":  # CI builds it: missing is a failure there
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def llama_server() -> Iterator[object]:
    _need_llama_server()
    from rageval.judge.local import LocalJudge

    with LocalJudge(port=0, engine="llama-server") as judge:
        yield judge


def test_rubrics_in_json_schema_then_an_exact_replay(llama_server: object,
                                                     tmp_path: Path) -> None:
    records = _write(tmp_path / "r.jsonl")
    metrics = ["judge:faithfulness", "judge:correctness"]
    judge = _judge(llama_server, tmp_path / "cache.sqlite", max_tokens=256)
    first = evaluate(str(records), metrics, judge=judge, bootstrap=50)
    manifest = first.manifest["judge"]
    # llama-server takes OpenAI's strict form: no refusal, no step down.
    assert manifest["response_format"]["refused"] == {}
    assert manifest["response_format"]["used"] == {"json_schema": manifest["requests"]} == {
        "json_schema": 4}
    # It names the model by its alias: an echo of the name asked for.
    assert manifest["served_models"] == {llama_server.name: 4}  # type: ignore[attr-defined]
    for name in metrics:
        _assert_judged(first, name, 1, 5)
        assert "|response_format:json_schema|" in first.summary[name].signature
    _assert_same(first, _replay(records, metrics, judge))


def test_an_over_long_prompt_fails_that_request_only(tmp_path: Path) -> None:
    """A context of 1,536 tokens: the record with a long context is unscored with
    llama-server's words, the other is judged, and the run goes on."""
    _need_llama_server()
    from rageval.judge.local import LocalJudge

    long = dict(RECORDS[1], contexts=[{"id": "a", "text": "The annual report lists many "
                                       "figures. " * 300}])
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps(RECORDS[0]) + "\n" + json.dumps(long) + "\n",
                       encoding="utf-8")
    with LocalJudge(port=0, engine="llama-server", context=1536) as judge:
        options = _judge(judge, tmp_path / "cache.sqlite", max_tokens=64)
        result = evaluate(str(records), ["judge:faithfulness"], judge=options, bootstrap=10)
    short, over = result.records
    assert over.scores["judge:faithfulness"] is None
    assert "exceeds the available context size" in over.errors["judge:faithfulness"]
    assert short.scores["judge:faithfulness"] is not None  # json_schema: always a score
    assert result.manifest["judge"]["failed"] == 1


def test_two_fresh_runs_get_the_same_replies(llama_server: object, tmp_path: Path) -> None:
    """Without llama-server's prompt cache (how rageval starts it), a reply does not depend on
    what an earlier request left in the cache: asked twice on empty caches, alike."""
    records = _write(tmp_path / "r.jsonl")
    metrics = ["judge:correctness", "judge:faithfulness"]
    runs = [evaluate(str(records), metrics, bootstrap=10,
                     judge=_judge(llama_server, tmp_path / f"c{i}.sqlite", max_tokens=256))
            for i in range(2)]
    for a, b in zip(runs[0].records, runs[1].records, strict=True):
        assert a.scores == b.scores
        for name in metrics:
            assert a.details[name]["reasoning"] == b.details[name]["reasoning"]
