"""Text rageval did not write reaches stderr and the dry run's table made safe: an endpoint's
words in what would stop a run, a trec-eval warning quoting a file's path, a judge URL that
cannot be read (refused without a traceback and without showing it)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from rageval.cli import main
from rageval.cli.dry_run import print_dry_run
from rageval.core.errors import UsageError
from rageval.core.results import Results
from rageval.judge.llm.transport.endpoint import Endpoint

HOSTILE = "x\n::error::injected\x1b[2J"


def _commands(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("::")]


def test_what_would_stop_a_dry_run_is_shown_safe() -> None:
    planned = {"requests": 1, "cache_hits": 0, "prompt_tokens": 10, "completion_tokens": 5,
               "cost_usd": None, "completion_estimate": HOSTILE}
    results = Results([], {}, {"judge": {"requests": 0, "dry_run": {f"judge:{HOSTILE}": planned},
                                         "would_stop": [f"endpoint said {HOSTILE}"]}})
    out = io.StringIO()
    problems = print_dry_run(results, Console(file=out, width=80))
    printed = out.getvalue()
    assert problems == [f"endpoint said {HOSTILE}"]
    assert "the real run would stop: endpoint said x\\n" in printed
    assert _commands(printed) == [] and "\x1b" not in printed


def test_a_trec_eval_warning_quoting_a_path_is_shown_safe(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "a\n::error::injected"
    folder.mkdir()
    qrels, run = folder / "qrels", folder / "run"
    qrels.write_text("q1 0 d1 1\n")
    run.write_text("q1 Q0 d1 1 1.5x r\n")  # a score not entirely a number: a warning
    assert main(["trec-eval", str(qrels), str(run)], stdout=io.StringIO()) == 0
    err = capsys.readouterr().err
    assert "not entirely a number" in err and _commands(err) == []


def test_a_judge_url_that_cannot_be_read_is_a_usage_error_that_shows_nothing_of_it() -> None:
    with pytest.raises(UsageError, match="cannot be read as a URL") as caught:
        Endpoint.of("http://u:TOKEN1234@[::1/v1")
    assert "TOKEN1234" not in str(caught.value)
