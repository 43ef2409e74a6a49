"""The hostile corpus through every channel of a real run: record ids and answers holding it,
a judge endpoint (the loopback server) whose errors hold it and echo the HTTP Basic
credentials of a ``user:pass@`` URL, under GitHub Actions with --junit and --markdown.

A simulated runner reading stdout and stderr finds only rageval's own annotations; every XML
file parses (ElementTree and junitparser); the Markdown renders to no raw HTML and no live
mention; no credential (the password, its Basic form, the API key) is in any output."""

from __future__ import annotations

import base64
import io
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from github_runner import runner_commands
from hostile import HOSTILE, LONG, live_mentions, raw_html_tags
from judge_server import JudgeServer
from markdown_it import MarkdownIt

from rageval.cli import main
from rageval.core.outputs.text import terminal

DEMO = Path(__file__).resolve().parents[3] / "fixtures" / "demo" / "records.jsonl"
PASSWORD = "SECRETPW9"
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
API_KEY = "sk-hostile-test-key-0123456789"
PHOENIX_KEY = "phx-hostile-test-key-98765"
CREDENTIALS = (PASSWORD, BASIC, API_KEY, PHOENIX_KEY)
ALLOWED_TAGS = frozenset({"h3", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "ul",
                          "li"})
ERROR_BODY = f"echoed Authorization: {{auth}} {HOSTILE}"


def _records(tmp_path: Path) -> Path:
    """The demo records, their ids and answers holding the hostile corpus; a file name with
    a control character."""
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    hostile_ids = [HOSTILE, "\n::error::id", "<img src=x onerror=alert(1)>", "@someone #1 |",
                   "%0A::add-mask::x", LONG, "\x01\x02\x1b[2J ]]>", "##[error]legacy"]
    for row, rid in zip(rows, hostile_ids, strict=True):
        row["id"] = rid
        if row.get("answer"):
            row["answer"] += " " + HOSTILE
    path = tmp_path / "rec\x01ords ::error::.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("PHOENIX_API_KEY", PHOENIX_KEY)
    return {"summary": summary, "junit": tmp_path / "junit.xml",
            "markdown": tmp_path / "comment.md", "out": tmp_path / "run"}


def _judge_args(server: JudgeServer, cache: Path) -> list[str]:
    url = server.base_url.replace("http://", f"http://user:{PASSWORD}@")
    return ["--judge-model", "m", "--judge-base-url", url, "--cache", str(cache),
            "--judge-max-retries", "0", "--judge-concurrency", "1"]


def _outputs(job: dict[str, Path], stdout: str, stderr: str) -> dict[str, str]:
    texts = {"stdout": stdout, "stderr": stderr}
    for name in ("summary", "junit", "markdown"):
        if job[name].exists():
            texts[name] = job[name].read_text(encoding="utf-8")
    for name in ("records.jsonl", "summary.json"):
        if (job["out"] / name).exists():
            texts[name] = (job["out"] / name).read_text(encoding="utf-8")
    return texts


def _assert_safe(texts: dict[str, str], own: list[str]) -> None:
    for where, text in texts.items():
        for secret in CREDENTIALS:
            assert secret not in text, f"{secret!r} in {where}"
    for where in ("stdout", "stderr"):
        acted = runner_commands(texts[where])
        assert [line for _, line in acted] == (own if where == "stdout" else []), where
        assert "\x1b" not in texts[where] and "\x01" not in texts[where]


def _assert_xml(path: Path) -> None:
    from junitparser import JUnitXml

    assert ET.parse(path).getroot().tag == "testsuites"
    assert len(list(JUnitXml.fromfile(str(path)))) == 1


def _assert_markdown(text: str) -> None:
    rendered = MarkdownIt("commonmark").enable("table").render(text)
    assert raw_html_tags(rendered, ALLOWED_TAGS) == []
    assert live_mentions(rendered) == []


def test_a_hostile_run_under_github_actions(job: dict[str, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    records = _records(tmp_path)
    with JudgeServer() as server:
        server.custom_error = (500, ERROR_BODY)
        server.fail_next(None, "custom", None, "custom", None, "custom")
        out = io.StringIO()
        code = main(["score", str(records), "-m", "ndcg@3", "-m", "judge:correctness",
                     *_judge_args(server, tmp_path / "cache.sqlite"), "--bootstrap", "20",
                     "--no-progress", "--fail-under", "judge:correctness=4.9",
                     "--fail-under", "ndcg@3=0.99", "--junit", str(job["junit"]),
                     "--markdown", str(job["markdown"]), "--out", str(job["out"])], stdout=out)
        assert any(auth.startswith("Basic ") for auth in server.authorizations)
    assert code == 3
    texts = _outputs(job, out.getvalue(), capsys.readouterr().err)
    own = [line for line in out.getvalue().splitlines() if line.startswith("::")]
    assert [line.split("::")[1] for line in own] == ["error title=rageval gate"] * 2 + [
        "warning title=rageval judge"]
    _assert_safe(texts, own)
    # The echoed header reached every channel masked, not dropped.
    assert "echoed Authorization: Basic ***" in texts["records.jsonl"]
    assert "echoed Authorization: Basic ***" in texts["stdout"]
    _assert_xml(job["junit"])
    for name in ("summary", "markdown"):
        _assert_markdown(texts[name])


def test_a_fatal_endpoint_error_is_safe_on_stderr(job: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    records = _records(tmp_path)
    with JudgeServer() as server:
        server.custom_error = (400, ERROR_BODY)
        server.always = "custom"
        out = io.StringIO()
        code = main(["score", str(records), "-m", "judge:correctness",
                     *_judge_args(server, tmp_path / "cache.sqlite"), "--no-progress"],
                    stdout=out)
    err = capsys.readouterr().err
    assert code != 0 and "Basic ***" in err
    _assert_safe({"stdout": out.getvalue(), "stderr": err}, [])


def test_export_junit_and_markdown_of_a_hostile_run(job: dict[str, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    records = _records(tmp_path)
    with JudgeServer() as server:
        server.custom_error = (500, ERROR_BODY)
        server.fail_next(None, "custom", None, "custom")
        main(["score", str(records), "-m", "judge:correctness", "--no-progress",
              *_judge_args(server, tmp_path / "cache.sqlite"), "--bootstrap", "20",
              "--out", str(job["out"])], stdout=io.StringIO())
    capsys.readouterr()
    for fmt, target in (("junit", tmp_path / "e.xml"), ("md", tmp_path / "e.md")):
        code = main(["export", str(job["out"]), "--format", fmt, "-o", str(target),
                     "--fail-under", "judge:correctness=4.9"], stdout=io.StringIO())
        assert code == 3
        text = target.read_text(encoding="utf-8")
        assert not any(secret in text for secret in CREDENTIALS)
    _assert_xml(tmp_path / "e.xml")
    _assert_markdown((tmp_path / "e.md").read_text(encoding="utf-8"))


def test_paths_the_commands_name_as_written_are_safe(tmp_path: Path) -> None:
    """The files a command says it wrote (the report beside a run, compare's and agree's
    --json) are named with their line breaks and escapes shown, never starting a command."""
    folder = tmp_path / "x\n::error::injected \x1b[2J"
    folder.mkdir()
    run = folder / "run"
    out = io.StringIO()
    assert main(["score", str(DEMO), "-m", "judge:faithfulness", "--judge-model",
                 "smollm2-135m-instruct", "--cache", str(DEMO.parent / "judge_cache.jsonl"),
                 "--offline", "--bootstrap", "20", "--no-progress", "--out", str(run),
                 "--report"], stdout=out) == 0
    shutil.copytree(run, folder / "copy")
    for command in ("compare", "agree"):
        code = main([command, str(run), str(folder / "copy"), "--json",
                     str(folder / "rows.json")], stdout=out)
        assert code == 0, command
    printed = out.getvalue()
    shown = terminal(str(folder))  # x\n:<joiner>:error:<joiner>:injected \x1b[2J
    assert f"wrote {shown}/run/report.html: open it" in printed
    assert printed.count(f"wrote {shown}/rows.json") == 2
    assert runner_commands(printed) == [] and "\x1b" not in printed


def _span(trace: str, span_id: str, parent: str | None, kind: str,
          **attributes: str) -> dict[str, object]:
    """One OTLP/JSON span of OpenInference ``kind``; attribute names with ``__`` for dots."""
    pairs = {"openinference.span.kind": kind,
             **{key.replace("__", "."): value for key, value in attributes.items()}}
    return {"traceId": trace, "spanId": span_id, "name": kind.lower(),
            **({"parentSpanId": parent} if parent else {}),
            "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [{"key": key, "value": {"stringValue": value}}
                           for key, value in pairs.items()]}


def _hostile_traces(path: Path) -> Path:
    """Two traces in OTLP/JSON whose attributes hold the hostile corpus: the id (mapped from
    the root's metadata), the question, the retrieved documents' ids and texts, the answer."""
    lines = []
    for n, rid in enumerate((HOSTILE.replace("\u202e", ""), "\n::error::trace id")):
        trace, root = f"{n + 1:032x}", f"{n + 1:016x}"
        spans = [
            _span(trace, root, None, "CHAIN", input__value=HOSTILE,
                  metadata=json.dumps({"qid": rid})),
            _span(trace, f"{n + 1:015x}a", root, "RETRIEVER",
                  retrieval__documents__0__document__id="::error::doc <img src=x onerror=x>",
                  retrieval__documents__0__document__content=HOSTILE),
            _span(trace, f"{n + 1:015x}b", root, "LLM",
                  llm__output_messages__0__message__role="assistant",
                  llm__output_messages__0__message__content="The answer. " + HOSTILE),
        ]
        lines.append(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_hostile_trace_attributes_and_judge_verdicts_under_github_actions(
        job: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trace attributes and a judge's reply holding two verdicts (whose conflict message
    quotes it), all of them hostile, reach every channel and command none of them."""
    traces = _hostile_traces(tmp_path / "spans.jsonl")
    with JudgeServer() as server:
        server.custom_reasoning = HOSTILE
        server.fail_next("custom_verdicts", "custom_verdicts")
        out = io.StringIO()
        code = main(["score", str(traces), "--input-format", "openinference",
                     "--map", "id=metadata.qid", "-m", "judge:faithfulness",
                     *_judge_args(server, tmp_path / "cache.sqlite"), "--bootstrap", "20",
                     "--no-progress", "--fail-under", "judge:faithfulness=4.9",
                     "--junit", str(job["junit"]), "--markdown", str(job["markdown"]),
                     "--out", str(job["out"])], stdout=out)
    texts = _outputs(job, out.getvalue(), capsys.readouterr().err)
    assert code == 1, texts["stderr"]  # the judge scored none: both replies conflict
    assert "conflicting verdicts" in texts["records.jsonl"]
    own = [line for line in out.getvalue().splitlines() if line.startswith("::")]
    assert own and all(line.startswith("::error title=rageval gate::") for line in own)
    _assert_safe(texts, own)
    _assert_xml(job["junit"])
    for name in ("summary", "markdown"):
        _assert_markdown(texts[name])
