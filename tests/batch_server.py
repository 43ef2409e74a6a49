"""A loopback stand-in for a provider's batch API (OpenAI's files and batches endpoints) in
tests, answering each batch line as :class:`judge_server.JudgeServer`'s chat server would.

Routes: ``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}/content``,
``POST /v1/batches``, ``GET /v1/batches`` (one page, newest first), ``GET /v1/batches/{id}``,
``POST /v1/batches/{id}/cancel``, and
``POST /v1/chat/completions``, answered and counted (:attr:`BatchServer.chats`), so that a
test asserts that a batch run sent none.

A batch answers its lines when it is looked at after :attr:`BatchServer.slow_polls` looks
(``in_progress`` until then; :attr:`BatchServer.hold`: ``in_progress`` until released). Faults
on demand:

* :attr:`BatchServer.line_faults`: a substring of a line's last user message -> the fault of
  that line: ``"error"`` (the line goes to the error file, as a request the provider could not
  run), ``"400"``/``"500"`` (an output line with that ``status_code`` and an error body), or a
  reply fault of the chat server (``"prose"``, ...);
* :attr:`BatchServer.refuse`: wire formats whose lines get a 400 naming ``response_format``;
* :attr:`BatchServer.expire_after`: the next batches (one value each) expire having answered
  that many lines, the others in the error file with code ``batch_expired`` (as OpenAI writes
  them; a cancelled batch's with ``batch_cancelled``);
* :attr:`BatchServer.upload_faults`: statuses the next uploads get (``500``: the SDK retries);
* :attr:`BatchServer.fail_batches`: how many of the next batches fail as a whole (their input
  file refused).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from judge_server import JudgeServer, wire_format

__all__ = ["BatchServer"]

_BATCH = re.compile(r"^/v1/batches/([\w-]+)(/cancel)?$")
_FILE = re.compile(r"^/v1/files/([\w-]+)/content$")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    provider: BatchServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, obj: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        provider = self.server.provider
        path = self.path.partition("?")[0]
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if found := _FILE.match(path):
                data = provider.files.get(found.group(1))
                if data is None:
                    self._send(404, {"error": {"message": "no such file"}})
                else:
                    self._send(200, None, data)
            elif (found := _BATCH.match(path)) and not found.group(2):
                self._send(*provider.look(found.group(1)))
            elif path == "/v1/batches":
                self._send(*provider.listed())
            else:
                self._send(404, {"error": {"message": f"no route {path}"}})

    def do_POST(self) -> None:
        provider = self.server.provider
        path = self.path.partition("?")[0]
        raw = self._body()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if path == "/v1/files":
                self._send(*provider.upload(raw, self.headers.get("Content-Type", "")))
            elif path == "/v1/batches":
                self._send(*provider.create(json.loads(raw)))
            elif (found := _BATCH.match(path)) and found.group(2):
                self._send(*provider.cancel(found.group(1)))
            elif path == "/v1/chat/completions":
                body = json.loads(raw)
                with provider.lock:
                    provider.chats += 1
                self._send(200, provider.judge._reply(body, None))
            else:
                self._send(404, {"error": {"message": f"no route {path}"}})


class BatchServer:
    """The loopback batch provider. Use as a context manager; :attr:`base_url` for clients."""

    def __init__(self) -> None:
        self.judge = JudgeServer()  # not started: its replies only
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.lines_of: dict[str, list[dict[str, Any]]] = {}  # batch id -> its input lines
        self.looks: dict[str, int] = {}
        self.slow_polls = 0
        self.hold = False
        self.line_faults: dict[str, str] = {}
        self.refuse: set[str] = set()
        self.expire_after: deque[int] = deque()
        self.upload_faults: deque[int] = deque()
        self.fail_batches = 0
        self.uploads = 0  # upload requests that arrived (a retried one counts twice)
        self.created = 0
        self.cancelled: list[str] = []
        self.chats = 0
        self.faulted: list[str] = []  # last user messages of the lines given a fault
        self._ids = itertools.count(1)
        self._httpd: _Server | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> BatchServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.provider = self
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    # -- endpoints -------------------------------------------------------------------------

    def upload(self, raw: bytes, content_type: str) -> tuple[int, Any]:
        with self.lock:
            self.uploads += 1
            if self.upload_faults:
                status = self.upload_faults.popleft()
                return status, {"error": {"message": "upload failed", "type": "server_error"}}
        boundary = content_type.partition("boundary=")[2].strip('"').encode()
        parts = {}
        for part in raw.split(b"--" + boundary):
            head, _, data = part.partition(b"\r\n\r\n")
            name = re.search(rb'name="(\w+)"', head)
            if name:
                parts[name.group(1).decode()] = data.removesuffix(b"\r\n")
        if parts.get("purpose") != b"batch":
            return 400, {"error": {"message": "purpose must be batch"}}
        file_id = f"file-{next(self._ids)}"
        with self.lock:
            self.files[file_id] = parts["file"]
        return 200, {"id": file_id, "object": "file", "bytes": len(parts["file"]),
                     "created_at": 0, "filename": "batch.jsonl", "purpose": "batch",
                     "status": "processed"}

    def create(self, body: dict[str, Any]) -> tuple[int, Any]:
        data = self.files.get(body.get("input_file_id", ""))
        if data is None or body.get("endpoint") != "/v1/chat/completions":
            return 400, {"error": {"message": "bad batch request"}}
        batch_id = f"batch_{next(self._ids)}"
        lines = [json.loads(line) for line in data.decode("utf-8").splitlines() if line]
        with self.lock:
            self.created += 1
            self.lines_of[batch_id] = lines
            self.looks[batch_id] = 0
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": body["endpoint"],
                "errors": None, "input_file_id": body["input_file_id"],
                "completion_window": body.get("completion_window", "24h"),
                "status": "validating", "output_file_id": None, "error_file_id": None,
                "created_at": 0, "request_counts": {"total": len(lines), "completed": 0,
                                                    "failed": 0},
                "metadata": body.get("metadata")}
            self.batches[batch_id]["_expire"] = (self.expire_after.popleft()
                                                 if self.expire_after else None)
            if self.fail_batches:
                self.fail_batches -= 1
                self.batches[batch_id].update(status="failed", errors={
                    "object": "list", "data": [{"code": "invalid_json_line", "line": 1,
                                                "message": "the input file holds a bad line",
                                                "param": None}]})
        return 200, self._shown(batch_id)

    def look(self, batch_id: str) -> tuple[int, Any]:
        with self.lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, {"error": {"message": "no such batch"}}
            self.looks[batch_id] += 1
            if batch["status"] in ("validating", "in_progress"):
                if self.hold or self.looks[batch_id] <= self.slow_polls:
                    batch["status"] = "in_progress"
                else:
                    self._answer(batch_id)
        return 200, self._shown(batch_id)

    def cancel(self, batch_id: str) -> tuple[int, Any]:
        with self.lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, {"error": {"message": "no such batch"}}
            self.cancelled.append(batch_id)
            if batch["status"] in ("validating", "in_progress"):
                self._not_run(batch_id, self.lines_of[batch_id], "batch_cancelled",
                              "This request was not executed because the batch was cancelled.")
                batch["status"] = "cancelled"
        return 200, self._shown(batch_id)

    def listed(self) -> tuple[int, Any]:
        """The account's batches, newest first (one page)."""
        with self.lock:
            data = [self._shown(b) for b in reversed(self.batches)]
        return 200, {"object": "list", "data": data, "has_more": False,
                     "first_id": data[0]["id"] if data else None,
                     "last_id": data[-1]["id"] if data else None}

    def release(self) -> None:
        """Let held batches finish at their next look."""
        with self.lock:
            self.hold = False

    # -- answers ---------------------------------------------------------------------------

    def _shown(self, batch_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    def _answer(self, batch_id: str) -> None:
        """Answer the batch's lines (lock held): its output and error files."""
        batch = self.batches[batch_id]
        expire = batch["_expire"]
        output, errors = [], []
        lines = self.lines_of[batch_id]
        for line in lines[:expire]:
            result = self._line(line)
            (errors if result.get("error") or result["response"]["status_code"] != 200
             else output).append(json.dumps(result))
        # As OpenAI does, the lines an expired batch never ran go to its error file.
        errors += [json.dumps(_not_run(line["custom_id"], "batch_expired", "This request could "
                                       "not be executed before the completion window expired."))
                   for line in (lines[expire:] if expire is not None else [])]
        self._files(batch, output, errors)
        batch["status"] = "expired" if expire is not None else "completed"
        batch["request_counts"].update(completed=len(output), failed=len(errors))

    def _not_run(self, batch_id: str, lines: list[dict[str, Any]], code: str,
                 message: str) -> None:
        """Write the lines a batch never ran to its error file (lock held)."""
        self._files(self.batches[batch_id], [], [json.dumps(_not_run(line["custom_id"], code,
                                                                     message))
                                                 for line in lines])

    def _files(self, batch: dict[str, Any], output: list[str], errors: list[str]) -> None:
        for name, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                file_id = f"file-{next(self._ids)}"
                self.files[file_id] = ("\n".join(lines) + "\n").encode("utf-8")
                batch[name] = file_id

    def _line(self, line: dict[str, Any]) -> dict[str, Any]:
        body = line["body"]
        message = JudgeServer.last_user_message(body)
        fault = next((f for part, f in self.line_faults.items() if part in message), None)
        custom_id = line["custom_id"]
        if fault is not None:
            self.faulted.append(message)
        if wire_format(body) in self.refuse:
            return _failed(custom_id, 400, "response_format of type 'json_schema' is not "
                           "supported by this model")
        refusal = self.judge.refused_param(body)  # a reasoning model's (JudgeServer.reasoning)
        if refusal is not None:
            return {"id": f"req_{custom_id[:8]}", "custom_id": custom_id, "error": None,
                    "response": {"status_code": refusal[0], "request_id": "r",
                                 "body": refusal[1]}}
        if fault == "error":
            return {"id": f"req_{custom_id[:8]}", "custom_id": custom_id, "response": None,
                    "error": {"code": "server_error", "message": "The request could not be "
                              "processed."}}
        if fault in ("400", "500"):
            return _failed(custom_id, int(fault), f"scripted HTTP {fault} for this line")
        return {"id": f"req_{custom_id[:8]}", "custom_id": custom_id, "error": None,
                "response": {"status_code": 200, "request_id": "r",
                             "body": self.judge._reply(body, fault)}}


def _failed(custom_id: str, status: int, message: str) -> dict[str, Any]:
    return {"id": f"req_{custom_id[:8]}", "custom_id": custom_id, "error": None,
            "response": {"status_code": status, "request_id": "r",
                         "body": {"error": {"message": message,
                                            "type": "invalid_request_error"}}}}


def _not_run(custom_id: str, code: str, message: str) -> dict[str, Any]:
    return {"id": f"req_{custom_id[:8]}", "custom_id": custom_id, "response": None,
            "error": {"code": code, "message": message}}
