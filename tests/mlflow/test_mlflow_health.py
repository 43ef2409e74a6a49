"""The health check of an MLflow tracking server (rageval.mlflow.tracking.check_reachable),
against loopback servers: it reaches a server as MLflow's own client does (the URI's
credentials as HTTP Basic, MLflow's TLS settings), any answer counts, and a redirect never
carries the credentials elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from http_doubles import HealthServer, self_signed
from mlflow_server import need_mlflow

from rageval.core.outputs.masking import basic_token
from rageval.mlflow.tracking import TrackingError, check_reachable

TLS_VARIABLES = ("MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_TRACKING_SERVER_CERT_PATH",
                 "MLFLOW_TRACKING_CLIENT_CERT_PATH", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


@pytest.fixture(autouse=True)
def _no_tls_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    need_mlflow()
    for name in TLS_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_the_credentials_go_as_http_basic_and_any_answer_counts() -> None:
    with HealthServer(lambda n: (503, {})) as server:  # a proxy's error is an answer too
        check_reachable(server.url.replace("http://", "http://ci-user:s3cret-pw@") + "/?k=v")
    ((path, headers),) = server.seen
    assert path == "/health"
    assert headers["authorization"] == f"Basic {basic_token('ci-user', 's3cret-pw')}"


def test_a_redirect_carries_the_credentials_nowhere() -> None:
    with HealthServer() as elsewhere, HealthServer(
            lambda n: (302, {"Location": f"{elsewhere.url}/health"})) as server:
        check_reachable(server.url.replace("http://", "http://ci-user:s3cret-pw@"))
    assert len(server.seen) == 1 and "authorization" in server.seen[0][1]
    assert all("authorization" not in headers for _, headers in elsewhere.seen)
    assert elsewhere.seen == []  # the redirect is an answer: not followed


def test_a_self_signed_server_is_reached_as_mlflow_s_settings_say(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = self_signed(tmp_path)
    with HealthServer(tls=(cert, key)) as server:
        with pytest.raises(TrackingError, match=r"cannot be reached: .*CERTIFICATE_VERIFY_FAILED"):
            check_reachable(server.url)
        monkeypatch.setenv("MLFLOW_TRACKING_INSECURE_TLS", "true")
        check_reachable(server.url)
        monkeypatch.delenv("MLFLOW_TRACKING_INSECURE_TLS")
        monkeypatch.setenv("MLFLOW_TRACKING_SERVER_CERT_PATH", str(cert))
        check_reachable(server.url)
        monkeypatch.delenv("MLFLOW_TRACKING_SERVER_CERT_PATH")
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
        check_reachable(server.url)
    assert [path for path, _ in server.seen] == ["/health"] * 3


def test_a_dropped_connection_is_said_without_the_credentials() -> None:
    with HealthServer(lambda n: None) as server, pytest.raises(TrackingError) as raised:
        check_reachable(server.url.replace("http://", "http://ci-user:s3cret-pw@"))
    message = str(raised.value)
    assert message.startswith(f"MLflow tracking server {server.url} cannot be reached: ")
    assert "s3cret" not in message and "ci-user" not in message
