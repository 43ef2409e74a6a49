"""The local web server of ``rageval annotate``: the page and its JSON API on 127.0.0.1
(another ``--host`` only when asked, with a warning), each request answered only with the
token made for this start (``secrets.token_urlsafe``, compared in constant time), else 403.

Every answer, refusals and the errors of HTTP itself (a bad request line, a method other than
GET and POST: 405) included, is JSON apart from the page and carries the page's
Content-Security-Policy, ``X-Content-Type-Options: nosniff``, ``Cache-Control: no-store`` and
``Referrer-Policy: no-referrer`` (the token is in the address). Bound to loopback, a request
whose ``Host`` is not the loopback address it was sent to is refused (403), so that a web page
whose name was rebound to 127.0.0.1 cannot reach it even before the token is checked. A
connection idle for ``READ_TIMEOUT_S`` is closed. The server runs in threads; the queue it
serves is what serializes the writes."""

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

__all__ = ["LOOPBACK", "READ_TIMEOUT_S", "AnnotateServer", "is_loopback", "make_server"]

LOOPBACK = "127.0.0.1"
#: How long a connection may keep a thread waiting for its request.
READ_TIMEOUT_S = 30
#: The methods the server answers; others are 405.
ALLOWED = "GET, POST"


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

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request's ``Host`` names this server: any, unless bound to loopback,
        where only the loopback names with the port (or without it on port 80) are."""
        bound, port = self.server_address[:2]
        if not is_loopback(str(bound)):
            return True
        names = {"127.0.0.1", "localhost", "[::1]",
                 f"[{bound}]" if ":" in str(bound) else str(bound)}  # 127.0.0.2 too
        allowed = {f"{name}:{port}" for name in names}
        if port == 80:
            allowed.update(names)
        return (host or "").strip().lower() in allowed


def make_server(api: Api, host: str = LOOPBACK, port: int = 0) -> AnnotateServer:
    """A server bound to ``host``:``port`` (0: a free port) with a new token."""
    return AnnotateServer((host, port), api, load_page(), secrets.token_urlsafe(32))


class _Handler(BaseHTTPRequestHandler):
    server: AnnotateServer
    server_version = "rageval-annotate"
    sys_version = ""
    timeout = READ_TIMEOUT_S

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

    def _not_allowed(self) -> None:
        """Any other method: the token first, as for every request, then 405."""
        if not self._authorised(parse_qs(urlsplit(self.path).query)):
            return
        self.close_connection = True  # a body it may carry is not read
        self._json(405, {"error": f"method {self.command} is not allowed: use {ALLOWED}"},
                   {"Allow": ALLOWED})

    do_HEAD = do_OPTIONS = do_PUT = do_DELETE = do_PATCH = _not_allowed

    def __getattr__(self, name: str) -> Any:
        """Any other method (TRACE, a made-up one) is answered as the ones above: the token
        first, then 405."""
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """The errors http.server sends itself (a bad request line, too long a line, an
        unknown method), as JSON with the same headers as every answer."""
        short = self.responses.get(code, ("error", ""))[0]
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # no version was read: answer with headers
            self.request_version = "HTTP/1.0"
        self._json(code, {"error": message or short}, {"Connection": "close"})

    def _authorised(self, query: dict[str, list[str]]) -> bool:
        if not self.server.host_allowed(self.headers.get("Host")):
            self._refuse("the Host header must name the loopback address the page is served on")
            return False
        given = (query.get("token") or [""])[0]
        if hmac.compare_digest(given.encode(), self.server.token.encode()):
            return True
        self._refuse("a valid token is required: open the address rageval annotate printed")
        return False

    def _refuse(self, reason: str) -> None:
        self.close_connection = True  # a body it may carry is not read
        self._json(403, {"error": reason})

    def _json(self, status: int, body: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self._send(status, data, "application/json; charset=utf-8", headers)

    def _send(self, status: int, data: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", self.server.page.policy)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":  # an answer to HEAD has the headers alone
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows the address line and errors only."""
