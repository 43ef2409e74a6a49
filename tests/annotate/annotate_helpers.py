"""Helpers of the annotate tests: judged runs to label, and ``rageval annotate`` served from a
thread of the test or run as a process of its own."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rageval.annotate.command import build_server
from rageval.annotate.server import AnnotateServer
from rageval.cli import main
from rageval.cli.parser import build_parser
from rageval.core.results import MetricSummary, RecordResult, Results

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"
FAITH = "judge:faithfulness"
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def write_judged_run(directory: Path, scores: Mapping[str, float | None], *,
                     details: Mapping[str, Mapping[str, Any]] | None = None,
                     texts: Mapping[str, str] | None = None,
                     metric: str = FAITH) -> Path:
    """A run as `rageval score --out DIR` writes it for a rubric judge metric, and the records
    file it names: record ``q`` answers ``texts[q]`` (else a plain answer)."""
    directory.mkdir(parents=True, exist_ok=True)
    records_file = directory / "records.source.jsonl"
    rows = [{"id": rid, "query": f"query of {rid}",
             "contexts": [{"id": f"{rid}-c1", "text": f"first context of {rid}"},
                          {"id": f"{rid}-c2", "text": f"second context of {rid}"}],
             "answer": (texts or {}).get(rid, f"answer of {rid}")} for rid in scores]
    records_file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    results = []
    for rid, value in scores.items():
        detail = dict((details or {}).get(rid, {"reasoning": f"the judge's reason for {rid}"}))
        results.append(RecordResult(rid, {metric: math.nan if value is None else float(value)},
                                    {}, {metric: detail}))
    name = metric.removeprefix("judge:")
    summary = {metric: MetricSummary(value=3.0, n=len(scores), unscored=0, ci95=None,
                                     signature=f"{metric}|rubric:{name}")}
    manifest = {"records": {"source": str(records_file), "count": len(scores)},
                "judge": {"model": "judge-model", "prompts": {name: {
                    "version": "1", "source": str(ROOT / "prompts" / f"{name}.toml")}}}}
    return Results(results, summary, manifest).write(directory / "run")


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo records judged (faithfulness, context relevance) from the demo's judge cache,
    with ndcg@3 beside them."""
    out = tmp_path_factory.mktemp("demo") / "judged"
    code = main(["score", str(DEMO / "records.jsonl"), "-m", FAITH, "-m",
                 "judge:context_relevance", "-m", "ndcg@3", "--judge-model",
                 "smollm2-135m-instruct", "--cache", str(DEMO / "judge_cache.jsonl"),
                 "--offline", "--bootstrap", "20", "--out", str(out), "--no-progress"],
                stdout=io.StringIO())
    assert code == 0
    return out


@dataclass
class Client:
    """Requests to a served page, with its token unless told otherwise."""

    server: AnnotateServer

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def request(self, method: str, path: str, body: bytes | None = None, *,
                token: str | None = "", query: str = "") -> tuple[int, dict[str, str], bytes]:
        given = self.server.token if token == "" else token
        parts = [p for p in (None if given is None else f"token={given}", query) if p]
        url = self.base + path + ("?" + "&".join(parts) if parts else "")
        request = urllib.request.Request(url, data=body, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def get(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        status, _, data = self.request("GET", path, **kwargs)
        return status, json.loads(data)

    def post(self, path: str, payload: Any, **kwargs: Any) -> tuple[int, Any]:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        status, _, data = self.request("POST", path, body, **kwargs)
        return status, json.loads(data)

    def label(self, record_id: str, value: Any, metric: str = FAITH) -> tuple[int, Any]:
        return self.post("/api/label", {"id": record_id, "metric": metric, "label": value})


def annotate_args(run: Path, labels: Path, *extra: str) -> Any:
    return build_parser().parse_args(["annotate", str(run), "--metric", FAITH, "--labels",
                                      str(labels), "--annotator", "ana", *extra])


@contextlib.contextmanager
def serving(run: Path, labels: Path, *extra: str) -> Iterator[Client]:
    """``rageval annotate`` with these options, served from a thread until the block ends."""
    server = build_server(annotate_args(run, labels, *extra))
    # A short poll, so that the shutdown at the end of each test does not wait half a second.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield Client(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def label_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


ENTRY = "import sys; from rageval.cli import main; sys.exit(main())"


class Annotator:
    """A ``rageval annotate`` process and requests to it."""

    def __init__(self, run: Path, labels: Path, name: str, *extra: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", ENTRY, "annotate", str(run), "--metric", FAITH, "--labels",
             str(labels), "--annotator", name, *extra], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env)
        assert self.process.stdout is not None
        self.line = self.process.stdout.readline()
        match = re.fullmatch(r"open (http://127\.0\.0\.1:\d+/)\?token=([\w-]+)\n", self.line)
        assert match, (self.line, self.process.stderr.read() if self.process.stderr else "")
        self.base, self.token = match[1], match[2]

    def call(self, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(f"{self.base}{path.lstrip('/')}?token={self.token}",
                                         data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def stop(self, signum: int) -> tuple[int, str]:
        """Send ``signum``; the exit status and what the process wrote to stderr."""
        self.process.send_signal(signum)
        _, err = self.process.communicate(timeout=10)
        return self.process.returncode, err
