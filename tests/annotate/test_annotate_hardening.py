"""``rageval annotate`` under failure and abuse: errors while serving come back as JSON (no
empty reply), bad options exit 2, other methods and bad requests are refused with the security
headers, a foreign Host is refused, and the options are declared once."""

from __future__ import annotations

import errno
import http.client
import io
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from annotate_helpers import FAITH, ROOT, annotate_args, serving, write_judged_run

from rageval.annotate import server as server_module
from rageval.annotate.walk import DEFAULT_BUDGET, SELECT
from rageval.cli import main

SCORES = {"a": 2.0, "b": 4.0, "c": 5.0}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_judged_run(tmp_path / "r", SCORES)


# -- errors while serving --------------------------------------------------------------------

def test_a_labels_file_broken_while_serving_is_500_naming_the_line(run: Path, tmp_path: Path,
                                                                  capsys) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        assert client.label("a", 3)[0] == 200
        with labels.open("a", encoding="utf-8") as handle:  # written by hand meanwhile
            handle.write(json.dumps({"id": "q9", "metric": FAITH, "label": "x",
                                     "annotator": "bob", "time": "2024-01-01T00:00:00Z",
                                     "shown_judge": False}) + "\n")
        status, headers, data = client.request("GET", "/api/next")
    assert status == 500 and headers["Content-Type"].startswith("application/json")
    assert headers["X-Content-Type-Options"] == "nosniff"
    error = json.loads(data)["error"]
    assert f"{labels}, line 2, field 'label'" in error
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{labels}, line 2" in err


def test_a_hostile_value_in_the_labels_file_reaches_stderr_inert(run: Path, tmp_path: Path,
                                                                capsys) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        assert client.label("a", 3)[0] == 200
        with labels.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"id": "q9", "metric": FAITH, "label": "::error::owned",
                                     "annotator": "bob", "time": "2024-01-01T00:00:00Z"}) + "\n")
        assert client.request("GET", "/api/next")[0] == 500
    err = capsys.readouterr().err
    assert f"{labels}, line 2, field 'label'" in err
    assert "::error::" not in err  # no workflow command a CI runner would obey


def test_a_disk_refusing_a_write_is_500_with_the_reason(run: Path, tmp_path: Path,
                                                        capsys, monkeypatch) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        def full(*args: object, **kwargs: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device", str(labels))

        monkeypatch.setattr(client.server.api.queue.labels, "append", full)
        status, answer = client.label("a", 3)
    assert status == 500
    assert answer["error"] == f"No space left on device: {labels}"
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [f"rageval: error: No space left on device: {labels}"]


def test_a_failed_fsync_names_the_labels_file(run: Path, tmp_path: Path, capsys,
                                              monkeypatch) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        def failed(*args: object, **kwargs: object) -> None:
            raise OSError(errno.EIO, "Input/output error")  # fsync names no file

        monkeypatch.setattr(client.server.api.queue.labels, "append", failed)
        status, answer = client.label("a", 3)
    assert status == 500 and answer["error"] == f"Input/output error: {labels}"
    assert "Traceback" not in capsys.readouterr().err


def test_a_bug_is_500_without_detail_and_its_traceback_on_stderr(run: Path, tmp_path: Path,
                                                                 capsys, monkeypatch) -> None:
    with serving(run, tmp_path / "labels.jsonl") as client:
        def broken() -> None:
            raise ZeroDivisionError("secret detail")

        monkeypatch.setattr(client.server.api.queue, "next", broken)
        status, answer = client.get("/api/next")
        assert client.get("/api/record", query="id=a")[0] == 200  # still serving
    assert status == 500 and answer == {"error": "internal error: ZeroDivisionError"}
    err = capsys.readouterr().err
    assert "Traceback" in err and "secret detail" in err


# -- bad options -------------------------------------------------------------------------------

@pytest.mark.parametrize(("option", "message"), [
    (["--select", "active", "--budget", "inf"], "--budget: must be positive and finite, got inf"),
    (["--select", "active", "--budget", "nan"], "--budget: must be positive and finite, got nan"),
    (["--budget", "-1"], "--budget: must be positive"),
    (["--labels", "{tmp}"], "{tmp}: cannot open the labels file: Is a directory"),
    (["--labels", "/proc/x/y"],
     "/proc/x/y: cannot make the labels file's folder: No such file or directory"),
])
def test_bad_options_exit_2(tmp_path: Path, capsys, option: list[str], message: str) -> None:
    run = write_judged_run(tmp_path / "r", SCORES)
    argv = ["annotate", str(run), "--metric", FAITH, "--labels", str(tmp_path / "l.jsonl"),
            *(o.format(tmp=tmp_path) for o in option)]
    code = main(argv, stdout=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and message.format(tmp=tmp_path) in err and "Traceback" not in err


# -- options declared once ---------------------------------------------------------------------

def test_the_walk_owns_the_choices_and_the_budget(tmp_path: Path) -> None:
    args = annotate_args(tmp_path, tmp_path / "l.jsonl")
    assert float(args.budget) == DEFAULT_BUDGET and args.select in SELECT
    from rageval.cli.parser import build_parser

    (annotate,) = [action.choices["annotate"] for action in build_parser()._actions
                   if isinstance(action.choices, dict) and "annotate" in action.choices]
    (select,) = [a for a in annotate._actions if "--select" in a.option_strings]
    assert tuple(select.choices) == SELECT


def test_building_the_parser_does_not_import_the_walk() -> None:
    code = ("import sys; from rageval.cli.parser import build_parser; build_parser(); "
            "print('rageval.annotate.walk' in sys.modules, 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


# -- HTTP itself -------------------------------------------------------------------------------

SECURITY = ("Content-Security-Policy", "X-Content-Type-Options", "Cache-Control",
            "Referrer-Policy")


def _call(client, method: str, path: str, *, token: bool = True,
          host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """A request by http.client (which sends any method and Host), with the token if told."""
    address, port = client.server.server_address[:2]
    connection = http.client.HTTPConnection(address, port, timeout=10)
    try:
        target = f"{path}?token={client.server.token}" if token else path
        headers = {} if host is None else {"Host": host}
        connection.request(method, target, body=b"{}" if method != "HEAD" else None,
                           headers=headers)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


def _raw(client, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """What the server answers to these bytes, sent as they are."""
    with socket.create_connection(client.server.server_address[:2], timeout=10) as sock:
        sock.sendall(request)
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        return answer.status, dict(answer.getheaders()), answer.read()


def _secured(headers: dict[str, str]) -> None:
    assert all(name in headers for name in SECURITY), headers
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "PUT", "DELETE", "PATCH", "TRACE",
                                    "BREW"])
def test_other_methods_need_the_token_then_are_405(run: Path, tmp_path: Path,
                                                   method: str) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        status, headers, data = _call(client, method, "/api/label", token=False)
        assert status == 403
        _secured(headers)
        if method != "HEAD":
            assert "token" in json.loads(data)["error"]
        status, headers, data = _call(client, method, "/api/label")
        assert status == 405 and headers["Allow"] == "GET, POST"
        _secured(headers)
        if method == "HEAD":
            assert data == b""
        else:
            assert json.loads(data)["error"].startswith(f"method {method} is not allowed")
        assert client.get("/api/next")[0] == 200  # still serving
    assert labels.read_text() == ""


@pytest.mark.parametrize(("request_bytes", "status"), [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET / HTTP/9.9\r\n\r\n", 505),
    (b"GET /" + b"x" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"BREW /api/next HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 403),  # no token: refused
])
def test_errors_of_http_itself_are_json_with_the_headers(run: Path, tmp_path: Path,
                                                          request_bytes: bytes,
                                                          status: int) -> None:
    with serving(run, tmp_path / "labels.jsonl") as client:
        got, headers, data = _raw(client, request_bytes)
    assert got == status
    _secured(headers)
    assert "error" in json.loads(data) and b"<" not in data


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1",
                                  "localhost.evil.example:{port}", ""])
def test_a_foreign_host_is_refused_on_loopback(run: Path, tmp_path: Path, host: str) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        port = client.server.server_address[1]
        for method, path in (("GET", "/"), ("GET", "/api/next"), ("POST", "/api/undo")):
            status, headers, data = _call(client, method, path, host=host.format(port=port))
            assert status == 403 and "Host" in json.loads(data)["error"]
            _secured(headers)
        for name in ("127.0.0.1", "localhost", "LOCALHOST"):
            assert _call(client, "GET", "/api/next", host=f"{name}:{port}")[0] == 200


def test_a_server_bound_to_another_loopback_address_takes_its_own_name(
        run: Path, tmp_path: Path) -> None:
    with serving(run, tmp_path / "labels.jsonl", "--host", "127.0.0.2") as client:
        port = client.server.server_address[1]
        assert client.server.url.startswith(f"http://127.0.0.2:{port}/")
        assert _call(client, "GET", "/api/next", host=f"127.0.0.2:{port}")[0] == 200
        assert _call(client, "GET", "/api/next", host=f"127.0.0.3:{port}")[0] == 403


def test_any_host_is_taken_when_bound_elsewhere(run: Path, tmp_path: Path, capsys) -> None:
    with serving(run, tmp_path / "labels.jsonl", "--host", "0.0.0.0") as client:
        assert _call(client, "GET", "/api/next", host="annotate.example:8080")[0] == 200
        assert _call(client, "GET", "/api/next", host="x", token=False)[0] == 403


def test_an_idle_connection_is_closed(run: Path, tmp_path: Path, monkeypatch) -> None:
    assert server_module.READ_TIMEOUT_S == server_module._Handler.timeout == 30
    monkeypatch.setattr(server_module._Handler, "timeout", 0.2)
    with (serving(run, tmp_path / "labels.jsonl") as client,
          socket.create_connection(client.server.server_address[:2], timeout=10) as sock):
        start = time.monotonic()
        assert sock.recv(1024) == b""  # closed by the server, not by our own timeout
        assert time.monotonic() - start < 5
