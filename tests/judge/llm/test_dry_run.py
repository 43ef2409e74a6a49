"""--dry-run: what a run would ask its judge, counted and priced, with nothing sent and nothing
written; its request count is the real run's."""

from __future__ import annotations

import io
import json
import re
import socket
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import TEST_KEY_ENV, JudgeServer, keyed_options

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.metric import ScoreOptions
from rageval.core.records import records_from_dicts
from rageval.core.registry import create
from rageval.judge.llm.costs.tokens import CHARS_PER_TOKEN, PER_MESSAGE, PER_REPLY
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.rubric.render import render

METRICS = ["judge:faithfulness", "judge:correctness"]



def _records(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"q{i}", "query": f"What is fact {i}?", "contexts": [f"Fact {i} is blue."],
        "answer": f"Fact {i}: blue.", "reference": "Blue."}) + "\n" for i in range(n)))
    return path


def _judge(keyed_judge: JudgeServer, cache: Path, **kw: object) -> JudgeOptions:
    return keyed_options(keyed_judge, cache, **kw)


def test_a_dry_run_sends_nothing_writes_nothing_and_counts_what_a_run_sends(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    records = _records(tmp_path / "r.jsonl", 12)
    judge = _judge(keyed_judge, tmp_path / "c.sqlite", price_in=2.0, price_out=8.0)
    dry = evaluate(records, METRICS, judge=replace(judge, dry_run=True), bootstrap=1)
    assert keyed_judge.requests == 0 and not (tmp_path / "c.sqlite").exists()
    planned = dry.manifest["judge"]["dry_run"]
    assert {k: v["requests"] for k, v in planned.items()} == {"faithfulness": 12,
                                                              "correctness": 12}
    # The loopback server has no tokenizer: 4 characters a token, plus ChatML's framing.
    assert "4 characters a token" in dry.manifest["judge"]["prompt_tokens_counted_by"]
    metric = create("judge:faithfulness", ScoreOptions(judge=judge))
    expected = 0
    for line in records.read_text().splitlines():
        messages = render(metric.rubric, records_from_dicts([json.loads(line)])[0])
        expected += (sum(-(-len(m["content"]) // CHARS_PER_TOKEN) for m in messages)
                     + PER_MESSAGE * len(messages) + PER_REPLY)
    assert planned["faithfulness"]["prompt_tokens"] == expected
    assert planned["faithfulness"]["completion_tokens"] is None  # nothing cached to go by
    assert planned["faithfulness"]["cost_usd"] == pytest.approx(expected * 2.0 / 1e6)
    assert all(r.errors["judge:faithfulness"] == "not asked: a dry run sends nothing"
               for r in dry.records)
    real = evaluate(records, METRICS, judge=judge, bootstrap=1)
    assert real.manifest["judge"]["requests"] == keyed_judge.requests == 24


def test_a_dry_run_counts_the_cache_hits_and_prices_by_the_cached_replies(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    judge = _judge(keyed_judge, tmp_path / "c.sqlite", price_in=1.0, price_out=1.0)
    evaluate(_records(tmp_path / "few.jsonl", 5), METRICS, judge=judge, bootstrap=1)
    sent = keyed_judge.requests
    dry = evaluate(_records(tmp_path / "more.jsonl", 8), METRICS,
                   judge=replace(judge, dry_run=True), bootstrap=1)
    planned = dry.manifest["judge"]["dry_run"]["faithfulness"]
    assert (planned["requests"], planned["cache_hits"]) == (3, 5)
    assert planned["completion_estimate"] == "the mean of this run's cached replies"
    assert planned["completion_tokens"] is not None and planned["completion_tokens"] > 0
    real = evaluate(_records(tmp_path / "more.jsonl", 8), METRICS, judge=judge, bootstrap=1)
    assert real.manifest["judge"]["requests"] == keyed_judge.requests - sent == 6
    again = evaluate(_records(tmp_path / "more.jsonl", 8), METRICS,
                     judge=replace(judge, dry_run=True, refresh=True), bootstrap=1)
    assert again.manifest["judge"]["dry_run"]["faithfulness"]["requests"] == 8  # --refresh


def test_the_command_line_prints_the_table_and_writes_no_run(tmp_path: Path,
                                                             keyed_judge: JudgeServer) -> None:
    records = _records(tmp_path / "r.jsonl", 4)
    out = io.StringIO()
    argv = ["score", str(records), "-m", "judge:faithfulness", "-m", "rouge1",
            "--judge-model", "judge-model", "--judge-base-url", keyed_judge.base_url,
            "--judge-api-key-env", TEST_KEY_ENV, "--cache", str(tmp_path / "c.sqlite"), "--dry-run",
            "--judge-max-tokens", "50", "--judge-price-in", "1", "--judge-price-out", "2",
            "--no-progress", "--out", str(tmp_path / "run")]
    assert main(argv, stdout=out) == 0
    text = out.getvalue()
    assert "dry run over 4 records: nothing was sent" in text
    assert "faithfulness (judge)" in text and "rouge1" not in text
    assert "at most --judge-max-tokens each" in text
    assert "nothing was written to" in text
    assert not (tmp_path / "run").exists() and not (tmp_path / "c.sqlite").exists()
    assert keyed_judge.requests == 0
    out = io.StringIO()
    assert main(["score", str(records), "-m", "rouge1", "--dry-run", "--no-progress"],
                stdout=out) == 0
    assert "nothing would be sent" in out.getvalue()


def _dry(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["score", *argv, "--dry-run", "--no-progress"], stdout=out)
    return code, " ".join(out.getvalue().split())  # the table's words, whatever the width


def test_the_total_row_adds_up_every_column(tmp_path: Path, keyed_judge: JudgeServer) -> None:
    """The total row left completion tokens and cost blank while every row above had them."""
    records = _records(tmp_path / "r.jsonl", 4)
    code, text = _dry([str(records), "-m", "judge:faithfulness", "-m", "judge:correctness",
                       "--judge-model", "judge-model", "--judge-base-url", keyed_judge.base_url,
                       "--judge-api-key-env", TEST_KEY_ENV, "--cache", str(tmp_path / "c.db"),
                       "--judge-max-tokens", "50", "--judge-price-in", "1",
                       "--judge-price-out", "2"])
    assert code == 0
    rows = {name: re.search(rf"{name} (?:\(judge\) )?│ (\d+) │ (\d+) │ ([\d,]+) │ ([\d,]+) │ "
                            r"([\d.]+) │", text) for name in ("faithfulness", "correctness",
                                                                 "total")}
    assert all(rows.values()), text
    numbers = {name: [float(g.replace(",", "")) for g in m.groups()]  # type: ignore[union-attr]
               for name, m in rows.items()}
    assert numbers["total"][3] == 2 * 4 * 50
    for column in range(5):
        assert numbers["total"][column] == pytest.approx(
            numbers["faithfulness"][column] + numbers["correctness"][column], abs=1e-4)
    unknown = _dry([str(records), "-m", "judge:faithfulness", "--judge-model", "judge-model",
                    "--judge-base-url", keyed_judge.base_url, "--judge-api-key-env",
                    TEST_KEY_ENV, "--cache", str(tmp_path / "c.db"), "--judge-price-in", "1"])[1]
    assert re.search(r"total │ 4 │ 0 │ [\d,]+ │ unknown │ [\d.]+\+ │", unknown)


def test_a_dry_run_without_the_api_key_says_the_real_run_would_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.error
    import urllib.request

    def no_tokenizer(request: object, timeout: float) -> object:  # OpenAI's: 404, no network
        raise urllib.error.HTTPError("https://api.openai.com/tokenize", 404, "Not Found",
                                     None, None)  # type: ignore[arg-type]

    # The tokenizer's requests import urllib.request when they are made.
    monkeypatch.setattr(urllib.request, "urlopen", no_tokenizer)
    monkeypatch.delenv("RAGEVAL_TEST_NO_SUCH_KEY", raising=False)
    records = _records(tmp_path / "r.jsonl", 3)
    code, text = _dry([str(records), "-m", "judge:faithfulness", "--judge-model", "gpt-4o-mini",
                       "--judge-api-key-env", "RAGEVAL_TEST_NO_SUCH_KEY",
                       "--cache", str(tmp_path / "c.db")])
    assert code == 2
    assert ("the real run would stop: 3 judge replies are not cached and must be asked for, "
            "but no API key: set the environment variable RAGEVAL_TEST_NO_SUCH_KEY") in text
    assert "offers no tokenizer" in text  # the endpoint answered: it has none


def test_a_dry_run_against_a_refused_connection_says_the_real_run_would_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It said 'the endpoint offers no tokenizer', exit 0, and the real run then failed."""
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    monkeypatch.setenv(TEST_KEY_ENV, "sk-test")
    code, text = _dry([str(_records(tmp_path / "r.jsonl", 3)), "-m", "judge:faithfulness",
                       "--judge-model", "judge-model", "--judge-base-url", url,
                       "--judge-api-key-env", TEST_KEY_ENV, "--cache", str(tmp_path / "c.db")])
    assert code == 2
    assert "offers no tokenizer" not in text
    assert ("4 characters a token (the endpoint could not be reached: the connection was "
            "refused: nothing listens there)") in text
    assert (f"the real run would stop: judge endpoint {url}: the connection was refused: "
            "nothing listens there") in text
