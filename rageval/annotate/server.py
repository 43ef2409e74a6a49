"""The local web server of ``rageval annotate``: the page and its JSON API on 127.0.0.1
(another ``--host`` only when asked, with a warning), each request answered only with the
token made for this start (``secrets.token_urlsafe``, compared in constant time), else 403.

Every answer carries the page's Content-Security-Policy, ``X-Content-Type-Options: nosniff``,
``Cache-Control: no-store`` and ``Referrer-Policy: no-referrer`` (the token is in the
address). The server runs in threads; the queue it serves is what serializes the writes."""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rageval.annotate.api import MAX_BODY_BYTES, Api
from rageval.annotate.page import Page, load_page

__all__ = ["LOOPBACK", "AnnotateServer", "is_loopback", "make_server"]

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AnnotateServer(ThreadingHTTPServer):
    """The server, holding what its handlers answer with: the API, the page, the token."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: Api, page: Page, token: str) -> None:
        self.api, self.page, self.token = api, page, token
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        """The address to open, token included (a wildcard host is opened on loopback)."""
        host, port = self.server_address[:2]
        shown = LOOPBACK if host in ("0.0.0.0", "::", "") else str(host)
        shown = f"[{shown}]" if ":" in shown else shown
        return f"http://{shown}:{port}/?token={self.token}"


def make_server(api: Api, host: str = LOOPBACK, port: int = 0) -> AnnotateServer:
    """A server bound to ``host``:``port`` (0: a free port) with a new token."""
    return AnnotateServer((host, port), api, load_page(), secrets.token_urlsafe(32))


class _Handler(BaseHTTPRequestHandler):
    server: AnnotateServer
    server_version = "rageval-annotate"
    sys_version = ""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if not self._authorised(query):
            return
        if url.path == "/":
            self._send(200, self.server.page.html, "text/html; charset=utf-8")
        else:
            self._json(*self.server.api.get(url.path, query))

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        if not self._authorised(parse_qs(url.query)):
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self.close_connection = True
            self._json(400, {"error": f"the body must be at most {MAX_BODY_BYTES} bytes"})
            return
        self._json(*self.server.api.post(url.path, self.rfile.read(length)))

    def _authorised(self, query: dict[str, list[str]]) -> bool:
        given = (query.get("token") or [""])[0]
        if hmac.compare_digest(given.encode(), self.server.token.encode()):
            return True
        self._json(403, {"error": "a valid token is required: open the address rageval "
                                  "annotate printed"})
        return False

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self._send(status, data, "application/json; charset=utf-8")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", self.server.page.policy)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows the address line and errors only."""
