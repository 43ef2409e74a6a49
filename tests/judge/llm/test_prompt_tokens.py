"""How a dry run counts prompt tokens: the endpoint's tokenizer where it offers one, 4
characters a token where it does not or when it stops answering, plus ChatML's framing."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rageval.judge.llm.costs.tokens import PER_MESSAGE, PER_REPLY, PromptTokens


class _Tokenizer(BaseHTTPRequestHandler):
    """llama-cpp-python's count route: one token per word, until told to fail."""

    failing = False

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/extras/tokenize/count" or type(self).failing:
            self.send_error(500 if type(self).failing else 404)
            return
        data = json.dumps({"count": len(body["input"].split())}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def tokenizer() -> Iterator[str]:
    _Tokenizer.failing = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Tokenizer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


MESSAGES = [{"role": "system", "content": "grade the answer"},
            {"role": "user", "content": "the answer is twelve words long if you count them"}]
FRAMING = PER_MESSAGE * 2 + PER_REPLY


def test_the_endpoint_s_tokenizer_counts_each_message(tokenizer: str) -> None:
    counter = PromptTokens(tokenizer)
    assert counter.method.startswith("the endpoint's tokenizer")
    assert counter.count(MESSAGES) == 3 + 10 + FRAMING


def test_a_tokenizer_that_stops_answering_leaves_the_rest_estimated(tokenizer: str) -> None:
    counter = PromptTokens(tokenizer)
    _Tokenizer.failing = True
    assert counter.count(MESSAGES) == -(-16 // 4) + -(-50 // 4) + FRAMING
    assert counter.method.startswith("the endpoint's tokenizer until it failed, then 4 "
                                     "characters a token")


def test_an_endpoint_without_a_tokenizer_is_estimated(tokenizer: str) -> None:
    _Tokenizer.failing = True  # it answers, with an error status on every route
    counter = PromptTokens(tokenizer)
    assert counter.method.startswith("4 characters a token (the endpoint offers no tokenizer)")
    assert counter.unreachable is None
    assert counter.count(MESSAGES[:1]) == 4 + PER_MESSAGE + PER_REPLY


def test_an_endpoint_that_cannot_be_reached_is_not_one_without_a_tokenizer() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    counter = PromptTokens(f"http://127.0.0.1:{port}/v1")
    assert counter.unreachable == "the connection was refused: nothing listens there"
    assert counter.method.startswith("4 characters a token (the endpoint could not be "
                                      "reached: the connection was refused")
    assert counter.count(MESSAGES[:1]) == 4 + PER_MESSAGE + PER_REPLY


def test_only_an_address_nothing_can_answer_at_is_unreachable() -> None:
    """A refused connection and an unknown host stop a dry run; a timeout does not (a slow
    tokenizer says nothing of the chat endpoint the real run asks)."""
    import urllib.error

    from rageval.judge.llm.costs.tokens import _unreachable

    unknown = urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))
    assert _unreachable(unknown) == ("the host name cannot be resolved: "
                                     "[Errno -2] Name or service not known")
    assert _unreachable(urllib.error.URLError(ConnectionRefusedError())) == (
        "the connection was refused: nothing listens there")
    assert _unreachable(urllib.error.URLError(TimeoutError("timed out"))) is None
    assert _unreachable(TimeoutError("timed out")) is None
