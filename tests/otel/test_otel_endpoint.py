"""``rageval score --otel-endpoint URL``: the evaluation events sent over OTLP/HTTP to a loopback
collector started by the test (it decodes each protobuf request as a collector does), the same
events as the file holds, with the headers of the exporter's variables; a collector that is not
running, or a headers variable the exporter would drop, refused before scoring; a collector that
refuses the events or goes away during the run said once the run is over, with the run's files
kept; no credential of the URL or the headers ever shown."""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from otel_read import Event, body_events, file_events, trace_roots

from rageval.cli import main
from rageval.judge.local.server import free_port

pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="the evaluation events need the otel extra")

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "fixtures" / "traces"
DEMO = ROOT / "fixtures" / "demo"
TRACE_RUN = ["score", str(TRACES / "spans.otlp.jsonl"), "--input-format", "openinference",
             "--map", "id=metadata.qid", "--references", str(TRACES / "references.jsonl"),
             "-m", "ndcg@3", "-m", "rouge1", "--no-progress"]


class Collector:
    """A loopback OTLP/HTTP logs receiver: what each request carried, by path; it answers
    :attr:`status` (200: taken)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, list[Event]]] = []  # path, content type, events
        self.headers: list[dict[str, str]] = []  # each request's headers (names lower-case)
        self.status = 200
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                collector.requests.append((self.path, self.headers["Content-Type"],
                                           body_events(body)))
                collector.headers.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(collector.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()

    def events(self) -> list[Event]:
        return [event for _, _, events in self.requests for event in events]


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    yield receiver
    receiver.close()


@pytest.fixture(autouse=True)
def _quick_giving_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exporter retries an unreachable collector until its timeout: one second here."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "1")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_HEADERS", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", raising=False)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def _key(event: Event) -> tuple[object, ...]:
    return (event.trace_id, event.span_id, tuple(sorted(event.attributes.items())))


def test_the_collector_receives_each_event_on_its_span(
        tmp_path: Path, collector: Collector, capsys: pytest.CaptureFixture[str]) -> None:
    events_file = tmp_path / "events.jsonl"
    code, _, err = run([*TRACE_RUN, "--otel-endpoint", collector.url, "--otel-events",
                        str(events_file)], capsys)
    assert code == 0, err
    assert [(path, kind) for path, kind, _ in collector.requests] == [
        ("/v1/logs", "application/x-protobuf")]
    received = collector.events()
    assert len(received) == 16 and all(e.name == "gen_ai.evaluation.result" for e in received)
    roots = trace_roots(TRACES / "spans.otlp.jsonl")
    assert all((e.trace_id, e.span_id) == roots[e.attributes["rageval.record.id"]]
               for e in received)
    # The file and the collector hold the same events.
    assert sorted(map(_key, received)) == sorted(map(_key, file_events(events_file)))
    assert (f"sent 16 evaluation events to the OTLP collector at {collector.url}/v1/logs: 16 on "
            "their records' spans") in err


def test_a_url_with_a_path_is_used_as_it_is(
        collector: Collector, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                        "--otel-endpoint", f"{collector.url}/otlp/v1/logs"], capsys)
    assert code == 0, err
    assert [path for path, _, _ in collector.requests] == ["/otlp/v1/logs"]
    assert {e.attributes["gen_ai.evaluation.name"] for e in collector.events()} == {"rouge1"}


def test_a_refusing_collector_is_said_and_the_run_is_kept(
        tmp_path: Path, collector: Collector, capsys: pytest.CaptureFixture[str]) -> None:
    collector.status = 404  # a server without an OTLP logs endpoint
    out, events_file = tmp_path / "run", tmp_path / "events.jsonl"
    code, stdout, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1",
                             "--no-progress", "--out", str(out), "--otel-events",
                             str(events_file), "--otel-endpoint",
                             f"http://otel:s3cret@127.0.0.1:{collector.server.server_address[1]}"],
                            capsys)
    assert code == 2
    port = collector.server.server_address[1]
    assert (f"the OTLP collector at http://127.0.0.1:{port}/v1/logs did not take the evaluation "
            "events (HTTP 404 Not Found); none was sent (the run's results stand in "
            f"{out})") in err
    assert err.count("127.0.0.1") == 1
    assert (out / "summary.json").exists() and "rouge1" in stdout
    assert file_events(events_file)  # the file is written all the same
    assert "s3cret" not in err and "Traceback" not in err


def test_a_collector_that_is_not_running_is_refused_before_scoring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{free_port()}/v1/logs"  # nothing listens there
    code, stdout, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1",
                             "--no-progress", "--out", str(out), "--otel-endpoint",
                             f"{url}?api-key=s3cret-token-1"], capsys)
    assert code == 2 and stdout == "" and not out.exists()
    assert f"the OTLP collector at {url} cannot be reached" in err
    assert "Connection refused" in err
    assert "s3cret-token-1" not in err and "Traceback" not in err


def test_a_collector_gone_during_the_run_is_said_once_and_the_run_is_kept(
        tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import rageval.otel

    real_send = rageval.otel.send_events

    def send_after_the_collector_stopped(*args: Any, **kwargs: Any) -> Any:
        collector.close()
        return real_send(*args, **kwargs)

    monkeypatch.setattr(rageval.otel, "send_events", send_after_the_collector_stopped)
    out = tmp_path / "run"
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                        "--out", str(out), "--otel-endpoint",
                        f"{collector.url}/v1/logs?api-key=s3cret-token-1"], capsys)
    assert code == 2
    url = f"{collector.url}/v1/logs"
    assert (f"rageval: error: the OTLP collector at {url} did not take the evaluation events "
            "(cannot be reached: [Errno 111] Connection refused); none was sent (the run's "
            f"results stand in {out})") in err
    assert err.count(url) == 1  # said once
    assert (out / "records.jsonl").exists()
    assert "s3cret-token-1" not in err and "Traceback" not in err


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_HEADERS",
                                      "OTEL_EXPORTER_OTLP_LOGS_HEADERS"])
@pytest.mark.parametrize("value", ["Authorization: Bearer s3cretTOKEN",
                                   "api-key=s3cretTOKEN;x"])
def test_a_malformed_headers_variable_is_refused_before_scoring_unshown(
        tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str], variable: str, value: str) -> None:
    """The SDK would drop the header with a warning quoting it whole, and the collector refuse
    the events after the run: rageval refuses the variable first, naming it, never its
    value."""
    monkeypatch.setenv(variable, value)
    out = tmp_path / "run"
    stdout = io.StringIO()
    code = main(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                 "--out", str(out), "--otel-endpoint", collector.url], stdout=stdout)
    captured = capfd.readouterr()  # the file descriptors: whatever reached the terminal
    err = captured.err
    assert code == 2 and stdout.getvalue() == "" and not out.exists()
    assert f"rageval: error: {variable}: a header in it is not NAME=VALUE" in err
    for text in (stdout.getvalue(), captured.out, err):
        assert "s3cret" not in text and "Bearer" not in text
    assert "Traceback" not in err and collector.requests == []


def test_the_headers_of_the_variable_reach_the_collector(
        collector: Collector, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS",
                       "api-key=s3cret-header-token,x-tenant=team%20a")
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                        "--otel-endpoint", collector.url], capsys)
    assert code == 0, err
    assert collector.headers and all(
        h["api-key"] == "s3cret-header-token" and h["x-tenant"] == "team a"
        for h in collector.headers)
    assert "s3cret-header-token" not in err


def test_a_malformed_url_is_refused_before_scoring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                          "--out", str(tmp_path / "o"), "--otel-endpoint", "localhost:4318"],
                         capsys)
    assert code == 2 and "expected an http:// or https:// URL" in err
    assert out == "" and not (tmp_path / "o").exists()


def test_without_the_http_exporter_the_error_names_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)
    code, out, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                          "--out", str(tmp_path / "o"), "--otel-endpoint",
                          "http://127.0.0.1:4318"], capsys)
    assert code == 2 and "pip install 'rageval[otel]'" in err
    assert "opentelemetry-exporter-otlp-proto-http" in err
    assert out == "" and not (tmp_path / "o").exists()


def test_a_failed_mlflow_step_still_sends_the_events_and_exits_2(
        tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The MLflow store refuses the run at logging time: said, and the events go out all the
    same, the run's exit status 2."""
    import importlib.util

    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("the MLflow step needs the mlflow extra")
    from rageval.mlflow import tracking

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise tracking.TrackingError("the MLflow tracking server refused the run: HTTP 503")

    monkeypatch.setattr(tracking, "open_store", lambda uri: None)  # checked before scoring
    monkeypatch.setattr(tracking, "log_run", refuse)
    out = tmp_path / "run"
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                        "--out", str(out), "--mlflow-tracking-uri", "http://127.0.0.1:5000",
                        "--otel-endpoint", collector.url], capsys)
    assert code == 2
    assert "the MLflow tracking server refused the run: HTTP 503" in err
    assert "(the run was not logged to MLflow" in err
    records = len((DEMO / "records.jsonl").read_text(encoding="utf-8").splitlines())
    assert len(collector.events()) == records  # one per record of the demo
    assert (f"sent {records} evaluation events to the OTLP collector at "
            f"{collector.url}/v1/logs") in err
    assert (out / "summary.json").exists()


def test_the_headers_values_are_among_the_runs_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval.cli.secrets import run_masker

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS",
                       "api-key=s3cret%2Dheader,authorization=Bearer%20t0ken-value")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "Authorization: Bearer s3cretTOKEN")
    mask = run_masker(None)
    text = "s3cret%2Dheader s3cret-header Bearer t0ken-value / t0ken-value s3cretTOKEN"
    assert mask(text) == "*** *** *** / *** ***"


def test_a_refused_endpoint_is_named_without_its_credentials() -> None:
    from rageval.core.errors import UsageError
    from rageval.otel.export import logs_url

    with pytest.raises(UsageError) as refused:
        logs_url("ftp://alice:secret@collector.example/v1/logs?token=abc")
    said = str(refused.value)
    assert "'ftp://collector.example/v1/logs'" in said
    assert "alice" not in said and "secret" not in said and "token" not in said
    with pytest.raises(UsageError) as refused:  # a password holding a raw "/"
        logs_url("ftp://alice:s3/cret@collector.example")
    assert "alice" not in str(refused.value) and "cret" not in str(refused.value)
