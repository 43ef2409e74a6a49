"""``rageval score --mlflow-tracking-uri http://...`` against a real ``mlflow server`` (its
start takes seconds: slow): the run, its values and its files read back over HTTP, the
server's artifact proxy included, with the URI's credentials never shown."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow_server import MlflowServer, need_mlflow

from rageval.cli import main
from rageval.core.results import Results
from rageval.mlflow.names import metric_key

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"
METRICS = ["ndcg@3", "rouge1", "mrr"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    need_mlflow()
    with MlflowServer(tmp_path_factory.mktemp("mlflow-server")) as started:
        yield started


def test_a_run_logged_over_http_reads_back_whole(server: MlflowServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    # The server takes no credentials; they ride along as HTTP Basic and are never shown.
    uri = server.url.replace("http://", "http://ci-user:s3cret-pw@")
    out = io.StringIO()
    code = main(["score", str(DEMO), *[a for m in METRICS for a in ("-m", m)], "--no-progress",
                 "--bootstrap", "50", "--out", str(tmp_path / "run"), "--mlflow-tracking-uri",
                 uri, "--mlflow-experiment", "over-http"], stdout=out)
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"to experiment 'over-http' at {server.url}" in err
    assert "s3cret-pw" not in err + out.getvalue()
    client = MlflowClient(tracking_uri=server.url)
    experiment = client.get_experiment_by_name("over-http")
    (logged,) = client.search_runs([experiment.experiment_id])
    results = Results.load(tmp_path / "run")
    for name in METRICS:
        summary = results.summary[name]
        key = metric_key(name)
        assert logged.data.metrics[key] == pytest.approx(summary.value)
        assert logged.data.metrics[f"{key}.ci95_low"] == pytest.approx(summary.ci95[0])
        assert logged.data.params[f"signature.{key}"] == summary.signature
    folder = Path(client.download_artifacts(logged.info.run_id, "", str(tmp_path / "back")))
    for name in ("summary.json", "records.jsonl"):
        assert (folder / name).read_bytes() == (tmp_path / "run" / name).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back", "run"]
