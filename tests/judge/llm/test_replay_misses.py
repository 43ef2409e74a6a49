"""An offline replay that misses says why: cached replies to the same prompts under other
settings are named, with the flags that would replay them."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.records import Record, records_from_dicts
from rageval.judge.llm.checks import OfflineCacheMiss
from rageval.judge.llm.misses import differences, nearest
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.units import make_unit

METRIC = "judge:faithfulness"


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


def records(n: int = 4) -> list[Record]:
    return records_from_dicts([
        {"id": f"q{i}", "query": f"Who wrote book {i}?",
         "contexts": [{"id": f"d{i}", "text": f"Book {i} was written by author {i}."}],
         "answer": f"Author {i} wrote it.", "reference": f"Author {i}."}
        for i in range(n)])


def options(tmp_path: Path, server: JudgeServer | None, **kw: Any) -> JudgeOptions:
    base: dict[str, Any] = {"model": "judge-model", "cache": str(tmp_path / "cache.sqlite"),
                            "timeout": 5.0, "max_retries": 1,
                            "base_url": server.base_url if server else "http://127.0.0.1:9/v1"}
    base.update(kw)
    if server is None:
        base["offline"] = True
    return JudgeOptions(**base)


def replay_error(tmp_path: Path, online: dict[str, Any], offline: dict[str, Any],
                 server: JudgeServer, recs: list[Record] | None = None) -> str:
    """The message of an offline replay under ``offline`` of a run made under ``online``."""
    recs = recs or records()
    evaluate(recs, [METRIC], judge=options(tmp_path, server, **online), bootstrap=10)
    with pytest.raises(OfflineCacheMiss) as caught:
        evaluate(recs, [METRIC], judge=options(tmp_path, None, **offline), bootstrap=10)
    return str(caught.value)


@pytest.mark.parametrize(("online", "offline", "said"), [
    ({"max_tokens": 512}, {}, "4 with max_tokens 512 where this run has none "
                              "(give --judge-max-tokens 512)"),
    ({}, {"max_tokens": 64}, "4 with max_tokens none where this run has 64 "
                             "(give without --judge-max-tokens)"),
    ({"temperature": 0.7}, {}, "4 with temperature 0.7 where this run has 0.0 "
                               "(give --judge-temperature 0.7)"),
    ({"seed": 7}, {"seed": 8}, "4 with seed 7 where this run has 8 (give --judge-seed 7)"),
    ({"response_format": "text"}, {"response_format": "json_schema"},
     '4 with response_format "text" where this run has "json_schema" '
     "(give --judge-response-format text)"),
    ({"extra": {"top_k": 1}}, {}, "4 with top_k 1 where this run has none "
                                  "(give --judge-extra top_k=1)"),
    ({"model": "other-model"}, {}, '4 with model "other-model" where this run has '
                                   '"judge-model" (give --judge-model other-model)'),
])
def test_a_miss_names_the_setting_that_differs(tmp_path: Path, server: JudgeServer,
                                               online: dict, offline: dict, said: str) -> None:
    message = replay_error(tmp_path, online, offline, server)
    assert "4 of 4 judge replies are not in the cache" in message
    assert "the cache holds replies to the same prompts under other settings" in message
    assert said in message
    assert "run once online to fill it" in message


def test_several_settings_are_named_together(tmp_path: Path, server: JudgeServer) -> None:
    message = replay_error(tmp_path, {"max_tokens": 512, "seed": 3}, {}, server)
    assert ("4 with max_tokens 512 where this run has none and seed 3 where this run has none "
            "(give --judge-max-tokens 512 --judge-seed 3)") in message


def test_more_samples_than_were_cached(tmp_path: Path, server: JudgeServer) -> None:
    message = replay_error(tmp_path, {"samples": 2, "temperature": 0.5},
                           {"samples": 3, "temperature": 0.5}, server)
    assert "4 of 12 judge replies are not in the cache" in message
    assert ("4 with samples up to 1 cached where this run asks for sample 2 "
            "(give --judge-samples 2)") in message


def test_a_changed_prompt_is_told_apart(tmp_path: Path, server: JudgeServer) -> None:
    recs = records()
    evaluate(recs[:2], [METRIC], judge=options(tmp_path, server, max_tokens=512), bootstrap=10)
    with pytest.raises(OfflineCacheMiss) as caught:
        evaluate(recs, [METRIC], judge=options(tmp_path, None), bootstrap=10)
    message = str(caught.value)
    assert "2 with max_tokens 512 where this run has none" in message
    assert "2 have no cached reply to the same prompt" in message


def test_nothing_alike_keeps_the_plain_message(tmp_path: Path, server: JudgeServer) -> None:
    recs = records()
    evaluate(recs[:1], [METRIC], judge=options(tmp_path, server), bootstrap=10)
    with pytest.raises(OfflineCacheMiss) as caught:
        evaluate(recs[1:], [METRIC], judge=options(tmp_path, None), bootstrap=10)
    message = str(caught.value)
    assert "other settings" not in message
    assert message.endswith("run once online to fill it, or give --allow-missing to leave "
                            "them unscored")


def test_the_cli_says_it_with_exit_2(tmp_path: Path, server: JudgeServer, capsys) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"id": r.id, "query": r.query, "answer": r.answer,
                                        "contexts": [c.text for c in r.contexts]}) + "\n"
                            for r in records(2)))
    common = [str(path), "-m", METRIC, "--judge-model", "m", "--cache",
              str(tmp_path / "c.sqlite"), "--no-progress", "--bootstrap", "10"]
    assert main(["score", *common, "--judge-base-url", server.base_url,
                 "--judge-max-tokens", "512", "--out", str(tmp_path / "a")],
                stdout=io.StringIO()) == 0
    capsys.readouterr()
    assert main(["score", *common, "--offline", "--out", str(tmp_path / "b")],
                stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "2 with max_tokens 512 where this run has none (give --judge-max-tokens 512)" in err


def test_the_nearest_cached_request_wins() -> None:
    judge = JudgeOptions(model="m", max_tokens=100)
    from rageval.judge.rubric.render import reply_schema
    from rageval.judge.rubric.rubrics import load_rubric
    schema = reply_schema(load_rubric("faithfulness"))
    messages = [{"role": "user", "content": "x"}]
    unit = make_unit(judge, schema, 0, None, 0, messages)
    far = {"model": "n", "messages": messages, "params": {"temperature": 0.5},
           "response_format": None, "sample_index": 0}
    near = {"model": "m", "messages": messages, "params": {"temperature": 0.0},
            "response_format": None, "sample_index": 0}
    other = {**near, "messages": [{"role": "user", "content": "y"}]}
    assert len(differences(judge, unit, far)) == 3
    found = nearest(judge, [unit], [far, other, near])
    assert found == {0: (("max_tokens", "null", "100"),)}
