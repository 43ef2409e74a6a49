"""What authenticates a judge request, and what a 401 then says: the API key as a Bearer
token, unless the base URL carries user info, which is sent as HTTP Basic auth instead."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import JudgeServer

from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.transport.client import JudgeClient, JudgeError, JudgeRequest
from rageval.judge.llm.transport.endpoint import Endpoint

ENV = "RAGEVAL_TEST_AUTH_KEY"
KEY = "sk-test-abcdef123456"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(ENV, KEY)
    with JudgeServer() as s:
        yield s


def _with_user(url: str, user: str = "alice", password: str = "pa55word") -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{user}:{password}@{rest}"


def _ask(base_url: str) -> None:
    JudgeClient(JudgeConfig(
        model="m", base_url=base_url, api_key_env=ENV, max_retries=0)).complete_many(
        [JudgeRequest([{"role": "user", "content": "Grade it."}])])


def test_the_key_is_sent_as_a_bearer_token(server: JudgeServer) -> None:
    _ask(server.base_url)
    assert server.authorizations == [f"Bearer {KEY}"]


def test_user_info_is_sent_as_basic_auth_in_place_of_the_key(server: JudgeServer) -> None:
    _ask(_with_user(server.base_url))
    expected = base64.b64encode(b"alice:pa55word").decode()
    assert server.authorizations == [f"Basic {expected}"]
    assert KEY not in server.authorizations[0]


def test_a_401_names_the_api_key_when_it_was_sent(server: JudgeServer) -> None:
    server.always = "401"
    with pytest.raises(JudgeError) as caught:
        _ask(server.base_url)
    message = str(caught.value)
    assert f"authentication failed: check the API key in ${ENV} (sent as a Bearer token)" \
        in message
    assert KEY not in message


def test_a_401_names_the_url_credentials_when_they_were_sent(server: JudgeServer) -> None:
    server.always = "401"
    with pytest.raises(JudgeError) as caught:
        _ask(_with_user(server.base_url))
    message = str(caught.value)
    assert ("authentication failed: check the user name and password in the base URL (sent "
            f"as HTTP Basic auth, in place of the API key in ${ENV})") in message
    assert "alice" not in message and "pa55word" not in message


def test_credentials_in_words() -> None:
    assert Endpoint.of("http://h/v1").credentials("K") == "the API key in $K (sent as a " \
                                                         "Bearer token)"
    assert "HTTP Basic auth" in Endpoint.of("http://u:p@h/v1").credentials("K")
    assert "HTTP Basic auth" in Endpoint.of("http://u@h/v1").credentials("K")
