"""How a Phoenix server's failures are told: each an error naming the project and the server
(without secrets), never a traceback."""

from __future__ import annotations

from typing import Any

import pytest

from rageval.core.errors import InputError
from rageval.inputs.traces.phoenix import phoenix_call

httpx = pytest.importorskip("httpx")


@pytest.fixture(autouse=True)
def _phoenix_client() -> None:
    # Imported here, not at collection: with Phoenix's server package installed, importing it
    # makes its working folders, which the session points at a temporary one by then.
    pytest.importorskip("phoenix.client", reason="the Phoenix tests need arize-phoenix-client")


URL = "http://127.0.0.1:6006"


def _status(code: int) -> Any:
    def call() -> None:
        request = httpx.Request("GET", f"{URL}/v1/projects/p/spans")
        raise httpx.HTTPStatusError("failed", request=request,
                                    response=httpx.Response(code, request=request))
    return call


def _raises(error: Exception) -> Any:
    def call() -> None:
        raise error
    return call


@pytest.mark.parametrize(("call", "message"), [
    (_status(404), "no such project on the server"),
    (_status(401), r"refused the request \(HTTP 401\): set PHOENIX_API_KEY"),
    (_status(403), r"refused the request \(HTTP 403\)"),
    (_status(500), "the server answered HTTP 500"),
    (_raises(httpx.ConnectError("refused")), "cannot reach the server: ConnectError"),
    (_raises(httpx.InvalidURL("bad")), "cannot reach the server: InvalidURL"),
])
def test_a_failure_names_the_project_and_the_server(call: Any, message: str) -> None:
    with pytest.raises(InputError, match=message) as error:
        phoenix_call(URL, "p", call)
    assert error.value.path == f"phoenix project 'p' at {URL}"


def test_a_server_too_old_for_a_call_says_so() -> None:
    from phoenix.client.exceptions import PhoenixException

    with pytest.raises(InputError, match=r"the server cannot do this: needs 19\.6"):
        phoenix_call(URL, "p", _raises(PhoenixException("needs 19.6")))


def test_other_errors_are_not_hidden() -> None:
    with pytest.raises(ZeroDivisionError):
        phoenix_call(URL, "p", lambda: 1 / 0)
