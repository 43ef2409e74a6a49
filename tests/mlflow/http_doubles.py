"""Loopback HTTP servers standing in for an MLflow tracking server's health check: each answers
``/health`` as a test scripts it (a status, a redirect, a dropped connection), over TLS with a
self-signed certificate when asked, and keeps the path and headers of every request."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import ssl
import subprocess
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Answer", "HealthServer", "self_signed"]

#: What the server does with the n-th request (0-based): (status, headers), or None to close
#: the connection without answering.
Answer = Callable[[int], tuple[int, dict[str, str]] | None]


class HealthServer:
    """A loopback server answering by ``answer``; :attr:`url` is where it listens,
    :attr:`seen` each request's path and headers (lower-case names)."""

    def __init__(self, answer: Answer | None = None, *, tls: tuple[Path, Path] | None = None):
        self.answer: Answer = answer or (lambda n: (200, {}))
        self.seen: list[tuple[str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                number = len(server.seen)
                server.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                answered = server.answer(number)
                if answered is None:
                    self.close_connection = True
                    return
                status, headers = answered
                self.send_response(status)
                for name, value in {**headers, "Content-Length": "2"}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HealthServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key, and the key, as PEM files in
    ``folder``: made with the ``cryptography`` package, or ``openssl``; the test is skipped,
    saying so, where neither is found."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        _with_cryptography(cert, key)
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor openssl makes a certificate")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True,
                       capture_output=True)
    return cert, key


def _with_cryptography(cert: Path, key: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(private.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
