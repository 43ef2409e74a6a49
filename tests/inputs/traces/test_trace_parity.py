"""Traces and native records give the same numbers: an instrumented pipeline (the openai SDK
under openinference-instrumentation-openai, asking the local SmolLM2 server; retriever spans
made with the OpenInference conventions; exported by the OTLP/JSON file exporter) writes its
traces and, beside them, the records it saw in rageval's own format. Scored through ``rageval
score``, both give the same records.jsonl, value for value, and the same summary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_model import need_local_extra
from trace_pipeline import MULTI_HOP, NO_RETRIEVAL, answer_questions, write_native, write_references

from rageval.cli import main

pytestmark = pytest.mark.real_model

METRICS = ["recall@3", "precision@3", "ndcg@3", "map", "mrr", "rouge1", "rougeL", "bleu"]


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    pytest.importorskip("openinference.instrumentation.openai",
                        reason="the trace fixtures need the test extra's instrumentation")
    need_local_extra()
    from rageval.judge.local import LocalJudge

    out = tmp_path_factory.mktemp("pipeline")
    with LocalJudge(port=0) as server:
        native = answer_questions(server.base_url, server.name, out / "spans.otlp.jsonl")
    write_native(out / "records.jsonl", native)
    write_references(out / "references.jsonl")
    yield out


def _score(args: list[str], out: Path) -> dict[str, object]:
    flags = [a for m in METRICS for a in ("-m", m)]
    assert main(["score", *args, *flags, "--no-progress", "--out", str(out)]) == 0
    return json.loads((out / "summary.json").read_text())


def test_traces_score_exactly_as_the_records_the_pipeline_saw(pipeline_run: Path,
                                                              tmp_path: Path) -> None:
    traced = _score([str(pipeline_run / "spans.otlp.jsonl"), "--input-format", "openinference",
                     "--map", "id=metadata.qid", "--references",
                     str(pipeline_run / "references.jsonl")], tmp_path / "traced")
    native = _score([str(pipeline_run / "records.jsonl")], tmp_path / "native")
    assert (tmp_path / "traced" / "records.jsonl").read_text() == \
        (tmp_path / "native" / "records.jsonl").read_text()
    for name, figures in native["metrics"].items():  # type: ignore[attr-defined]
        mine = traced["metrics"][name]  # type: ignore[index]
        assert (mine["value"], mine["n"], mine["ci95"]) == (
            figures["value"], figures["n"], figures["ci95"]), name
    # The fixture holds what the reader must handle: several hops, a trace without retrieval.
    rows = [json.loads(line) for line in (pipeline_run / "records.jsonl").read_text().splitlines()]
    hops = {r["id"]: len(r.get("contexts", [])) for r in rows}
    assert all(hops[q] > 3 for q in MULTI_HOP) and all(hops[q] == 0 for q in NO_RETRIEVAL)
    assert all(r["answer"] for r in rows)  # the model answered every question
