"""``rageval score --mlflow-tracking-uri``: the run logged to a real MLflow tracking store (a
SQLite one in a temporary folder) and read back with ``MlflowClient``: every headline value and
its CI, the signatures and settings, the run's files, and against a baseline the comparison;
and the errors (MLflow missing, no tracking store, one that cannot be reached)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from http_doubles import HealthServer
from mlflow_server import need_mlflow

from rageval.cli import main
from rageval.core.errors import UsageError
from rageval.core.results import Results
from rageval.judge.local.server import free_port
from rageval.mlflow.names import metric_key
from rageval.mlflow.tracking import shown_uri

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"
JUDGE = ["--judge-model", "smollm2-135m-instruct", "--cache", str(DEMO / "judge_cache.jsonl"),
         "--offline"]
METRICS = ["ndcg@3", "p(rel=2)@3", "rouge1", "judge:faithfulness"]
BASE = ["score", str(DEMO / "records.jsonl"), *[a for m in METRICS for a in ("-m", m)],
        *JUDGE, "--no-progress", "--bootstrap", "50"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite tracking store for the module (MLflow makes its tables once, in seconds),
    its artifacts beside it (MLflow's default for it: ./mlruns where the store is opened)."""
    need_mlflow()
    from mlflow.tracking import MlflowClient

    folder = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with contextlib.chdir(folder):
        MlflowClient(tracking_uri=uri).search_experiments()  # the tables made now
    return uri


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs in a temporary folder (nothing left behind); no MLflow variable of the environment
    reaches the tests."""
    monkeypatch.chdir(tmp_path)
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def only_run(uri: str, experiment: str) -> Any:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    runs = client.search_runs([found.experiment_id])
    assert len(runs) == 1
    return runs[0]


def artifacts(uri: str, run_id: str, into: Path) -> dict[str, bytes]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    names = sorted(a.path for a in client.list_artifacts(run_id))
    folder = Path(client.download_artifacts(run_id, "", str(into)))
    return {name: (folder / name).read_bytes() for name in names}


def expected_metrics(results: Results) -> dict[str, float]:
    out = {}
    for name, summary in results.summary.items():
        if not summary.in_table:
            continue
        key = metric_key(name)
        out[key] = summary.value
        out[f"{key}.ci95_low"], out[f"{key}.ci95_high"] = summary.ci95
    return out


def test_a_run_holds_every_headline_value_its_params_and_its_files(
        store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, err = run([*BASE, "--out", str(out), "--report", "--mlflow-tracking-uri", store,
                        "--mlflow-experiment", "headline"], capsys)
    assert code == 0, err
    logged = only_run(store, "headline")
    assert f"logged MLflow run {logged.info.run_id} to experiment 'headline'" in err
    assert logged.info.status == "FINISHED" and logged.info.run_name == "out"
    results = Results.load(out)
    assert logged.data.metrics == pytest.approx(expected_metrics(results))
    assert {"ndcg_at_3", "p_rel_2_at_3", "rouge1", "judge/faithfulness"} <= set(
        logged.data.metrics)
    params = logged.data.params
    for name in METRICS:
        assert params[f"signature.{metric_key(name)}"] == results.summary[name].signature
    assert params["metrics"] == ",".join(METRICS)
    assert params["bootstrap.resamples"] == "50" and params["records.count"] == "8"
    assert params["judge.model"] == "smollm2-135m-instruct" and params["ci"] == "records"
    tags = logged.data.tags
    assert tags["rageval.version"] == results.manifest["rageval"]
    assert tags["rageval.records"] == str(DEMO / "records.jsonl")
    assert "rageval.gate" not in tags  # no gate was asked for
    files = artifacts(store, logged.info.run_id, tmp_path / "back")
    assert sorted(files) == ["records.jsonl", "report.html", "summary.json", "summary.md"]
    for name in ("records.jsonl", "report.html", "summary.json"):
        assert files[name] == (out / name).read_bytes()
    assert "| `ndcg@3` | 0.7984 |" in files["summary.md"].decode()


def test_against_a_baseline_the_comparison_is_logged_too(
        store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = tmp_path / "baseline"
    assert run([*BASE, "--out", str(baseline)], capsys)[0] == 0
    code, _, err = run([*BASE, "--seed", "3", "--baseline", str(baseline), "--max-drop", "0.1",
                        "--mlflow-tracking-uri", store, "--mlflow-experiment", "compared"],
                       capsys)
    assert code == 0, err
    logged = only_run(store, "compared")
    metrics, before = logged.data.metrics, Results.load(baseline)
    for name in METRICS:
        key = metric_key(name)
        assert metrics[f"{key}.baseline"] == pytest.approx(before.summary[name].value)
        assert metrics[f"{key}.delta"] == pytest.approx(0.0)  # the same records, the same values
        assert metrics[f"{key}.p_value"] == pytest.approx(1.0)
    assert logged.data.tags["rageval.gate"] == "passed"
    assert logged.data.tags["rageval.compared"] == "baseline"
    files = artifacts(store, logged.info.run_id, tmp_path / "back")
    # No --out: the run's files were written for the upload only, and are gone.
    assert sorted(files) == ["comparison.json", "records.jsonl", "summary.json", "summary.md"]
    rows = json.loads(files["comparison.json"])
    assert sorted(r["metric"] for r in rows) == sorted(METRICS)
    assert all(r["check"] == "regression" and r["passed"] for r in rows)
    assert "baseline" in files["summary.md"].decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back", "baseline"]


def test_a_judge_mean_calibrated_by_human_labels_is_logged_with_its_ci(
        store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calibration = ROOT / "fixtures" / "calibration"
    out = tmp_path / "out"
    code, _, err = run(["score", str(calibration / "records.jsonl"), "-m", "judge:faithfulness",
                        "--judge-model", "smollm2-135m-instruct", "--cache",
                        str(calibration / "judge_cache.jsonl"), "--offline", "--human", "human",
                        "--no-progress", "--bootstrap", "50", "--out", str(out),
                        "--mlflow-tracking-uri", store, "--mlflow-experiment", "calibrated"],
                       capsys)
    assert code == 0, err
    metrics = only_run(store, "calibrated").data.metrics
    calibrated = Results.load(out).summary["judge:faithfulness"].calibrated
    assert calibrated is not None and calibrated.mean is not None and calibrated.ci95
    assert metrics["judge/faithfulness.calibrated"] == pytest.approx(calibrated.mean)
    assert (metrics["judge/faithfulness.calibrated_ci95_low"],
            metrics["judge/faithfulness.calibrated_ci95_high"]) == pytest.approx(calibrated.ci95)
    assert "judge/faithfulness.ci95_low" in metrics  # the uncalibrated mean stays beside it


def test_an_evaluation_file_names_the_store_under_output(
        store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eval_file = tmp_path / "eval.toml"
    eval_file.write_text(f'metrics = ["ndcg@3", "mrr"]\n[inputs]\nrecords = '
                         f'"{DEMO / "records.jsonl"}"\n[output]\ndir = "out"\n'
                         f'mlflow_tracking_uri = "{store}"\nmlflow_experiment = "from-file"\n')
    code, _, err = run(["run", str(eval_file), "--no-progress", "--bootstrap", "50"], capsys)
    assert code == 0, err
    logged = only_run(store, "from-file")
    assert set(logged.data.metrics) == {"ndcg_at_3", "ndcg_at_3.ci95_low", "ndcg_at_3.ci95_high",
                                        "mrr", "mrr.ci95_low", "mrr.ci95_high"}
    assert logged.data.tags["rageval.eval_file"] == str(eval_file)


def test_the_environment_gives_the_store_and_the_experiment(
        store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from-env")
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                        "--mlflow-experiment", "named"], capsys)
    assert code == 0, err
    assert only_run(store, "named").data.metrics["mrr"] > 0
    # The variable alone logs nothing: a run is logged when one of the options is given.
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress"],
                       capsys)
    assert code == 0 and "MLflow" not in err
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                        "--mlflow-tracking-uri", store], capsys)
    assert code == 0, err
    assert only_run(store, "from-env").data.metrics["mrr"] > 0


def test_an_experiment_without_a_store_is_refused_before_scoring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*BASE, "--out", str(tmp_path / "o"), "--mlflow-experiment", "x"],
                         capsys)
    assert code == 2 and "--mlflow-tracking-uri URI or MLFLOW_TRACKING_URI" in err
    assert out == "" and not (tmp_path / "o").exists()


def test_without_mlflow_the_error_names_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what an install without it finds
    code, out, err = run([*BASE, "--out", str(tmp_path / "o"), "--mlflow-tracking-uri",
                          f"sqlite:///{tmp_path / 'm.db'}"], capsys)
    assert code == 2
    assert "needs the 'mlflow' package: pip install 'rageval[mlflow]'" in err
    assert "Traceback" not in err and out == "" and not (tmp_path / "o").exists()


def test_an_unreachable_server_is_refused_before_scoring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_mlflow()
    uri = f"http://rageval:s3cret-pw@127.0.0.1:{free_port()}"
    out = tmp_path / "out"
    code, stdout, err = run([*BASE, "--out", str(out), "--mlflow-tracking-uri", uri], capsys)
    assert code == 2
    assert "MLflow tracking server http://127.0.0.1:" in err and "cannot be reached" in err
    assert "Connection refused" in err and "Traceback" not in err
    assert "s3cret-pw" not in err + stdout and "rageval:s3cret" not in err + stdout
    assert stdout == "" and not out.exists()  # nothing scored, nothing written


@pytest.mark.parametrize("uri", ["htps://bob:Sup3rSecretPw@mlflow.example.com",
                                 "postgresql://bob:Sup3rSecretPw@127.0.0.1/mlflow"])
def test_a_uri_mlflow_cannot_use_is_refused_before_scoring(
        uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_mlflow()
    if uri.startswith("postgresql") and _has_postgres_driver():
        pytest.skip("a PostgreSQL driver is installed: MLflow opens the URI (and waits on it)")
    code, stdout, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                             "--out", str(tmp_path / "o"), "--mlflow-tracking-uri", uri], capsys)
    assert code == 2, err
    shown = uri.replace("bob:Sup3rSecretPw@", "")
    assert f"MLflow cannot use the tracking store {shown} (--mlflow-tracking-uri): " in err
    assert "Traceback" not in err and "Sup3rSecretPw" not in err + stdout and "bob:" not in err
    assert stdout == "" and not (tmp_path / "o").exists()


def _has_postgres_driver() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(name) for name in ("psycopg", "psycopg2"))


def test_a_folder_store_is_refused_before_scoring_unless_mlflow_allows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    need_mlflow()
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    folder = tmp_path / "mlruns"
    argv = ["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
            "--mlflow-tracking-uri", str(folder)]
    code, stdout, err = run(argv, capsys)
    assert code == 2 and stdout == "" and "Traceback" not in err
    assert f"MLflow cannot use the tracking store {folder}" in err
    assert "MLFLOW_ALLOW_FILE_STORE=true" in err  # MLflow's own words say how
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert only_run(str(folder), "rageval").data.metrics["mrr"] > 0


def test_a_server_gone_by_the_time_the_run_is_logged_is_said_and_the_run_is_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_mlflow()
    out = tmp_path / "out"
    # It answers the check before scoring, and drops every connection after.
    with HealthServer(lambda n: (200, {}) if n == 0 else None) as server:
        uri = server.url.replace("http://", "http://rageval:s3cret-pw@")
        code, stdout, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr",
                                 "--no-progress", "--out", str(out), "--mlflow-tracking-uri",
                                 uri], capsys)
    assert code == 2
    assert f"MLflow tracking server {server.url} cannot be reached" in err
    assert f"its results stand in {out}" in err and "s3cret-pw" not in err + stdout
    assert [path for path, _ in server.seen] == ["/health", "/health"]
    assert Results.load(out).summary["mrr"].n == 7  # written whole before the attempt


def test_a_deleted_experiment_is_said_and_the_run_is_kept(
        store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store)
    client.delete_experiment(client.create_experiment("gone"))
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                        "--out", str(tmp_path / "out"), "--mlflow-tracking-uri", store,
                        "--mlflow-experiment", "gone"], capsys)
    assert code == 2
    assert "MLflow experiment 'gone' is deleted: restore it or name another" in err
    assert (tmp_path / "out" / "summary.json").is_file()


def test_credentials_of_the_environment_s_uri_are_never_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    need_mlflow()
    monkeypatch.setenv("MLFLOW_TRACKING_URI",
                       f"https://token-user:env-s3cret@127.0.0.1:{free_port()}/mlflow?key=q-s3cret")
    code, stdout, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                             "--mlflow-experiment", "x"], capsys)
    assert code == 2 and "cannot be reached" in err
    assert "https://127.0.0.1:" in err and "/mlflow " in err
    assert "s3cret" not in err + stdout


def test_a_report_left_by_an_earlier_run_is_not_uploaded_as_this_one_s(
        store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert run([*BASE, "--out", str(out), "--report"], capsys)[0] == 0
    code, _, err = run([*BASE, "--seed", "5", "--out", str(out), "--mlflow-tracking-uri", store,
                        "--mlflow-experiment", "stale-report"], capsys)
    assert code == 0, err
    assert (out / "report.html").is_file()  # the earlier run's, still there
    logged = only_run(store, "stale-report")
    files = artifacts(store, logged.info.run_id, tmp_path / "back")
    assert sorted(files) == ["records.jsonl", "summary.json", "summary.md"]
    assert "report.html" not in err


def test_without_out_the_summary_is_titled_with_the_run_s_name(
        store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                        "--mlflow-tracking-uri", store, "--mlflow-experiment", "titled"], capsys)
    assert code == 0, err
    logged = only_run(store, "titled")
    assert logged.info.run_name == "records.jsonl"
    summary = artifacts(store, logged.info.run_id, tmp_path / "back")["summary.md"].decode()
    assert "records.jsonl" in summary.splitlines()[0]
    assert "rageval-mlflow-" not in summary


def test_a_run_that_fails_after_it_began_is_marked_failed(
        store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from rageval.mlflow import tracking

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UsageError("the run's files cannot be read")

    monkeypatch.setattr(tracking, "_log_artifacts", refuse)
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                        "--out", str(tmp_path / "out"), "--mlflow-tracking-uri", store,
                        "--mlflow-experiment", "half-done"], capsys)
    assert code == 2 and "the run's files cannot be read" in err
    assert only_run(store, "half-done").info.status == "FAILED"


@pytest.mark.parametrize(("uri", "shown"), [
    ("https://alice:hunter@2-secret@mlflow.example.com/", "https://mlflow.example.com/"),
    ("https://alice:pa#ss?w@mlflow.example.com/x", "https://mlflow.example.com/x"),
    ("https://mlflow.example.com/mlflow?key=k-secret#frag-secret", "https://mlflow.example.com/mlflow"),
    ("http://127.0.0.1:5000/#token-secret", "http://127.0.0.1:5000/"),
    ("sqlite:///tmp/mlflow.db", "sqlite:///tmp/mlflow.db"),
    ("databricks", "databricks"),
])
def test_a_uri_is_shown_without_anything_that_may_be_a_credential(uri: str, shown: str) -> None:
    assert shown_uri(uri) == shown


def test_a_password_with_a_raw_at_sign_is_never_shown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_mlflow()
    uri = f"http://alice:hunter@2-secret@127.0.0.1:{free_port()}/#frag-secret"
    code, stdout, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                             "--mlflow-tracking-uri", uri], capsys)
    assert code == 2 and "cannot be reached" in err
    assert "MLflow tracking server http://127.0.0.1:" in err
    assert "secret" not in err + stdout and "hunter" not in err + stdout


def test_an_experiment_made_by_another_run_meanwhile_is_used(
        store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow.tracking import MlflowClient

    look_up = MlflowClient.get_experiment_by_name
    made_by_the_other: list[str] = []

    def racing(self: MlflowClient, name: str) -> Any:
        if not made_by_the_other:  # the other run makes it just after this one looked
            found = look_up(self, name)
            made_by_the_other.append(MlflowClient(tracking_uri=store).create_experiment(name))
            return found
        return look_up(self, name)

    monkeypatch.setattr(MlflowClient, "get_experiment_by_name", racing)
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "mrr", "--no-progress",
                        "--mlflow-tracking-uri", store, "--mlflow-experiment", "raced"], capsys)
    assert code == 0, err
    monkeypatch.undo()
    logged = only_run(store, "raced")
    assert logged.info.experiment_id == made_by_the_other[0]
