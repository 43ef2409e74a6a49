"""The Phoenix round trip against a real Phoenix server: an instrumented pipeline sends its
traces to the server (OTLP/HTTP) and to an OTLP/JSON file; ``rageval score --phoenix`` reads
them back as records, scores them (retrieval, ROUGE and a judge) and writes the values to the
spans as annotations; read back through Phoenix's API they equal records.jsonl, and a rerun
updates them without adding any."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_server import TEST_KEY_ENV, JudgeServer
from phoenix_server import PhoenixServer, need_phoenix
from trace_pipeline import QUESTIONS, answer_questions, write_references

from rageval.cli import main

METRICS = ["ndcg@3", "rouge1", "judge:faithfulness"]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    need_phoenix()
    pytest.importorskip("openinference.instrumentation.openai",
                        reason="the trace fixtures need the test extra's instrumentation")
    with PhoenixServer(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


@pytest.fixture(scope="module")
def traced(phoenix: PhoenixServer, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[str, Path]:
    """A project on the server holding the pipeline's traces, and the same traces' file."""
    from phoenix.client import Client

    out = tmp_path_factory.mktemp("pipeline")
    project = f"rag-{uuid.uuid4().hex[:8]}"
    with JudgeServer() as generator:
        answer_questions(generator.base_url, "generator", out / "spans.otlp.jsonl",
                         otlp_endpoint=phoenix.otlp, project=project)
    write_references(out / "references.jsonl")
    expected = sum(len(scope["spans"]) for line in
                   (out / "spans.otlp.jsonl").read_text().splitlines()
                   for rs in json.loads(line)["resourceSpans"] for scope in rs["scopeSpans"])
    client = Client(base_url=phoenix.url)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the server takes spans in the background
        try:
            if len(client.spans.get_spans(project_identifier=project, limit=1000)) == expected:
                return project, out
        except Exception:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the server did not take the {expected} spans")


def _score(phoenix: PhoenixServer, project: str, inputs: list[str], out: Path,
           judge: JudgeServer, cache: Path, references: Path) -> None:
    flags = [a for m in METRICS for a in ("-m", m)]
    code = main(["score", *inputs, "--phoenix", phoenix.url, "--project", project,
                 "--map", "id=metadata.qid", "--references", str(references), *flags,
                 "--judge-model", "judge-model", "--judge-base-url", judge.base_url,
                 "--judge-api-key-env", TEST_KEY_ENV, "--cache", str(cache),
                 "--phoenix-annotate", "--no-progress", "--out", str(out)])
    assert code == 0


def _annotations(phoenix: PhoenixServer, project: str) -> list[dict[str, Any]]:
    from phoenix.client import Client

    client = Client(base_url=phoenix.url)
    roots = client.spans.get_spans(project_identifier=project, parent_id="null", limit=1000)
    found: list[dict[str, Any]] = client.spans.get_span_annotations(
        spans=roots, project_identifier=project, limit=10_000)
    return found


def _records(out: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return {row["id"]: row for row in rows}


def test_ingest_score_annotate_read_back(phoenix: PhoenixServer, traced: tuple[str, Path],
                                         keyed_judge: JudgeServer, tmp_path: Path) -> None:
    project, files = traced
    references = files / "references.jsonl"
    _score(phoenix, project, [], tmp_path / "run", keyed_judge, tmp_path / "c.sqlite",
           references)
    rows = _records(tmp_path / "run")
    assert sorted(rows) == sorted(q for q, *_ in QUESTIONS)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["manifest"]["records"]["inputs"]["phoenix"] == phoenix.url
    # The same traces read from the file give the same records, value for value.
    _score(phoenix, project, [str(files / "spans.otlp.jsonl"), "--input-format",
                              "openinference"], tmp_path / "file", keyed_judge,
           tmp_path / "c.sqlite", references)
    from_file = _records(tmp_path / "file")
    assert {k: (r["scores"], r["errors"]) for k, r in from_file.items()} == {
        k: (r["scores"], r["errors"]) for k, r in rows.items()}

    annotations = _annotations(phoenix, project)
    spans = _root_spans(phoenix, project)
    assert len(annotations) == len(rows) * len(METRICS)  # the file's run updated, not added
    by_key = {(a["span_id"], a["name"]): a for a in annotations}
    unscored = 0
    for record_id, row in rows.items():
        for name in METRICS:
            annotation = by_key[(spans[record_id], name)]
            assert annotation["identifier"] == "rageval"
            result, value = annotation["result"], row["scores"][name]
            if value is None:
                unscored += 1
                assert result["label"] == "unscored"
                assert result["explanation"] == row["errors"][name]
                continue
            assert result["score"] == value and result["label"] is None
            judged = name.startswith("judge:")
            assert annotation["annotator_kind"] == ("LLM" if judged else "CODE")
            if judged:
                assert result["explanation"] == row["details"][name]["reasoning"]
    assert unscored  # a question answered without retrieval: its judge value has a reason

    before = {a["id"] for a in annotations}
    _score(phoenix, project, [], tmp_path / "again", keyed_judge, tmp_path / "c.sqlite",
           references)
    assert {a["id"] for a in _annotations(phoenix, project)} == before


def _root_spans(phoenix: PhoenixServer, project: str) -> dict[str, str]:
    """Question id -> its trace's root span id, as the server holds them."""
    from phoenix.client import Client

    client = Client(base_url=phoenix.url)
    roots = client.spans.get_spans(project_identifier=project, parent_id="null", limit=1000)
    return {root["attributes"]["metadata.qid"]: root["context"]["span_id"] for root in roots}


def test_annotating_records_not_from_traces_is_refused_before_scoring(
        phoenix: PhoenixServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text('{"id": "a", "answer": "x", "reference": "x"}\n')
    code = main(["score", str(records), "-m", "rouge1", "--phoenix", phoenix.url,
                 "--project", "p", "--phoenix-annotate", "--out", str(tmp_path / "o")])
    assert code == 2 and "read the records from traces" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_server_that_cannot_take_the_scores_fails_after_the_results_are_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The URL and client are checked first; the annotations go last, after the results and
    the CI outputs, and a server that is away fails the run with status 2, the rest intact."""
    spans = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "spans.otlp.jsonl"
    from rageval.judge.local.server import free_port

    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    references = spans.with_name("references.jsonl")
    code = main(["score", str(spans), "--input-format", "openinference", "-m", "rouge1",
                 "-m", "ndcg@3", "--map", "id=metadata.qid", "--references", str(references),
                 "--phoenix", closed, "--project", "p", "--phoenix-annotate",
                 "--junit", str(tmp_path / "j.xml"), "--no-progress", "--out",
                 str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach the server" in err and "results stand" in err
    assert (tmp_path / "o" / "records.jsonl").exists() and (tmp_path / "j.xml").exists()


def test_a_time_window_selects_the_traces(phoenix: PhoenixServer, traced: tuple[str, Path],
                                          tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    project, files = traced
    base = ["score", "--phoenix", phoenix.url, "--project", project, "--map", "id=metadata.qid",
            "-m", "rouge1", "--references", str(files / "references.jsonl"), "--no-progress"]
    assert main([*base, "--phoenix-since", "2000-01-01", "--phoenix-until", "2999-01-01",
                 "--out", str(tmp_path / "all")]) == 0
    assert len(_records(tmp_path / "all")) == len(QUESTIONS)
    capsys.readouterr()
    assert main([*base, "--phoenix-since", "2999-01-01T00:00:00+00:00"]) == 2
    assert "no trace gave a record" in capsys.readouterr().err


def test_traces_the_project_does_not_hold_are_not_annotated(
        phoenix: PhoenixServer, traced: tuple[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The fixture's traces were never sent to this server: nothing to annotate, said."""
    project, _ = traced
    spans = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "spans.otlp.jsonl"
    code = main(["score", str(spans), "--input-format", "openinference", "-m", "rouge1",
                 "--map", "id=metadata.qid", "--references",
                 str(spans.with_name("references.jsonl")), "--phoenix", phoenix.url,
                 "--project", project, "--phoenix-annotate", "--no-progress"])
    assert code == 2
    assert "none of the run's spans is in this project" in capsys.readouterr().err
