"""A scored run logged as an MLflow run: its headline values and their 95% CIs as metrics
(keys by :mod:`rageval.mlflow.names`), its signatures and settings as params, where it came
from as tags, and its files (``summary.json``, ``records.jsonl``, the report) as artifacts;
against a baseline, the comparison too.

MLflow is imported here only, when a run is logged (:func:`mlflow_client`): a run that logs
nothing never loads it. The tracking URI may carry credentials (``https://user:pw@host``):
what rageval says of it is :func:`shown_uri`, without them.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.core.errors import MissingDependencyError, RagevalError, UsageError
from rageval.core.outputs.masking import NO_SECRETS, Masker, url_secrets
from rageval.mlflow.names import (
    CALIBRATION_SUFFIXES,
    CI_SUFFIXES,
    COMPARISON_SUFFIXES,
    SIGNATURE_PREFIX,
    metric_keys,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from rageval.core.calibration import Calibration
    from rageval.core.results import Results
    from rageval.gate.model import GateReport

__all__ = ["DEFAULT_EXPERIMENT", "LoggedRun", "log_run", "mlflow_client", "open_store",
           "shown_uri"]

#: The experiment a run is logged to when none is named (nor MLFLOW_EXPERIMENT_NAME set).
DEFAULT_EXPERIMENT = "rageval"
# How long a tracking server is given to answer its health check before a run is logged.
_REACH_TIMEOUT_S = 10.0
# How urllib3 starts its errors' text: the connection object, which says nothing.
_OBJECT_REPR = re.compile(r"^<[^>]* object at 0x[0-9a-f]+>: ")
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*://")
# MLflow's cap on a param's value (its cap on a key's length: names.MAX_KEY_CHARS).
_PARAM_VALUE_CHARS = 6000
# The judge's settings that decide its replies (its usage and cache counts are tags' business).
_JUDGE_PARAMS = ("model", "temperature", "seed", "samples", "score", "max_tokens", "offline",
                 "render_version")


class TrackingError(RagevalError):
    """The tracking server could not take the run (unreachable, refused): exit status 2."""

    exit_code = 2


@dataclass(frozen=True)
class LoggedRun:
    """Where a run went: its MLflow run and experiment ids, and how many values it holds."""

    run_id: str
    experiment_id: str
    metrics: int
    params: int
    artifacts: list[str]


def shown_uri(uri: str) -> str:
    """``uri`` as rageval prints it: no user info, no query string, no fragment (any may
    hold a credential). The user info ends at the URI's last ``@``, as a password may hold a
    raw ``@`` (or ``/``, ``?``, ``#``): a path with an ``@`` is shown cut rather than a
    password shown."""
    scheme = _SCHEME.match(uri)
    start = scheme.end() if scheme else 0
    rest = uri[start:].rpartition("@")[2]
    return uri[:start] + re.split(r"[?#]", rest, maxsplit=1)[0]


def mlflow_client(uri: str) -> MlflowClient:
    """MLflow's client of the tracking store at ``uri``; a clear error naming the extra when
    MLflow is not installed, and a :class:`UsageError` saying why when MLflow cannot open the
    store (a scheme it does not know, a database driver missing, a folder store it no longer
    opens), the URI's credentials left out."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise MissingDependencyError("mlflow", "mlflow") from None
    try:
        return MlflowClient(tracking_uri=uri)
    except Exception as error:  # MLflow opens the store as its client is made
        raise UsageError(f"MLflow cannot use the tracking store {shown_uri(uri)} "
                         f"(--mlflow-tracking-uri): {_said(error, uri)}") from None


def open_store(uri: str) -> MlflowClient:
    """The client of the tracking store at ``uri``, checked: MLflow can open it
    (:func:`mlflow_client`) and, a tracking server, it answers (:func:`check_reachable`)."""
    client = mlflow_client(uri)
    check_reachable(uri)
    return client


def _said(error: BaseException, uri: str) -> str:
    """The first line of ``error`` as rageval shows it: ``uri`` as :func:`shown_uri` gives
    it, and whatever credential it carries masked."""
    text = _first_line(error).replace(uri, shown_uri(uri))
    return Masker.of(url_secrets(uri))(text)


def check_reachable(uri: str) -> None:
    """For an HTTP tracking server: one health check with a short timeout, so that an
    unreachable server is said at once (MLflow's own client retries for minutes). It goes
    through MLflow's own HTTP client, so that it reaches the server as MLflow will: the URI's
    credentials as HTTP Basic, MLflow's TLS settings (``MLFLOW_TRACKING_INSECURE_TLS``,
    ``MLFLOW_TRACKING_SERVER_CERT_PATH``, ``MLFLOW_TRACKING_CLIENT_CERT_PATH``,
    ``REQUESTS_CA_BUNDLE``). A redirect is not followed: any answer will do, and the
    credentials go nowhere else."""
    if not uri.lower().startswith(("http://", "https://")):
        return
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    server = re.split(r"[?#]", uri, maxsplit=1)[0]
    try:
        http_request(get_default_host_creds(server), "/health", "GET", max_retries=0,
                     backoff_factor=0, backoff_jitter=0, retry_codes=(),
                     timeout=_REACH_TIMEOUT_S, allow_redirects=False)
    except Exception as error:  # an answer of any status is none: it answered
        raise TrackingError(f"MLflow tracking server {shown_uri(uri)} cannot be reached: "
                            f"{_said(_root_cause(error), uri)}") from None


def _root_cause(error: BaseException) -> BaseException:
    """The error at the bottom of ``error``'s chain (MLflow's wraps requests', which wraps
    urllib3's, whose reason is the socket's)."""
    seen = {id(error)}
    while True:
        inner = error.__cause__ or error.__context__ or getattr(error, "reason", None)
        if not isinstance(inner, BaseException) and error.args:
            inner = error.args[0]
        if not isinstance(inner, BaseException) or id(inner) in seen:
            return error
        seen.add(id(inner))
        error = inner


def log_run(results: Results, run_dir: str | Path | None, uri: str, experiment: str, *,
            gate: GateReport | None = None, run_name: str | None = None,
            html_report: bool = False, masker: Masker = NO_SECRETS) -> LoggedRun:
    """Log ``results`` to the MLflow tracking store at ``uri``, in ``experiment`` (made when
    missing), as one finished run; ``run_dir``: where the run's files were written (None:
    they are written to a temporary folder for the upload). ``gate``: the run's gate, whose
    baseline comparison is logged too; ``html_report``: whether this run wrote ``report.html``
    in ``run_dir`` (one left there by an earlier run is not this run's). Raises
    :class:`TrackingError` when the store refuses or cannot be reached (the run's own files
    stand)."""
    keys = metric_keys(results.summary)
    client = open_store(uri)
    metrics, params = run_metrics(results, keys, gate), run_params(results, keys)
    run_id = None
    try:
        experiment_id = _experiment_id(client, experiment)
        run = client.create_run(experiment_id, run_name=run_name, tags=run_tags(results, gate))
        run_id = run.info.run_id
        _log_values(client, run_id, metrics, params)
        with _RunFolder(results, run_dir) as folder:
            files = _artifact_files(folder, results, html_report and run_dir is not None)
            artifacts = _log_artifacts(client, run_id, files, results, gate,
                                       run_name or folder.name, masker)
        client.set_terminated(run_id)
    except RagevalError:
        _mark_failed(client, run_id)
        raise
    except Exception as error:  # MLflow's own errors (MlflowException, requests' errors)
        _mark_failed(client, run_id)
        raise TrackingError(f"MLflow tracking store {shown_uri(uri)} refused the run: "
                            f"{masker(_said(error, uri))}") from None
    return LoggedRun(run_id, experiment_id, len(metrics), len(params), artifacts)


def _first_line(error: BaseException) -> str:
    text = _OBJECT_REPR.sub("", str(error).strip())
    return text.splitlines()[0] if text else type(error).__name__


def _mark_failed(client: MlflowClient, run_id: str | None) -> None:
    """A run begun and not finished is marked FAILED, where the store still answers."""
    if run_id is None:
        return
    try:
        client.set_terminated(run_id, status="FAILED")
    except Exception:  # the store's first error is the one said
        return


def _experiment_id(client: MlflowClient, name: str) -> str:
    """The experiment's id, the experiment made when missing (or found again when another
    run made it between the look-up and the making)."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is None:
        try:
            return str(client.create_experiment(name))
        except MlflowException as error:
            found = client.get_experiment_by_name(name)
            if error.error_code != "RESOURCE_ALREADY_EXISTS" or found is None:
                raise
    if found.lifecycle_stage == "deleted":
        raise UsageError(f"MLflow experiment {name!r} is deleted: restore it or name another "
                         "(--mlflow-experiment)")
    return str(found.experiment_id)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def run_metrics(results: Results, keys: Mapping[str, str],
                gate: GateReport | None = None) -> dict[str, float]:
    """Every headline value and the ends of its 95% CI (and its mean calibrated by human
    labels, with its CI, where the run had them), and against a baseline its value,
    the change and the p-value, by MLflow key (values that are not numbers are left out)."""
    out: dict[str, float] = {}
    for name, summary in results.summary.items():
        if not summary.in_table:
            continue
        key = keys[name]
        if _finite(summary.value):
            out[key] = float(summary.value)  # type: ignore[arg-type]
        for suffix, end in zip(CI_SUFFIXES, summary.ci95 or (), strict=False):
            if _finite(end):
                out[f"{key}.{suffix}"] = float(end)
        out.update(_calibrated(key, summary.calibrated))
    for row in _comparison_rows(gate):
        if row.metric not in keys:
            continue
        for suffix in COMPARISON_SUFFIXES:
            value = getattr(row, suffix)
            if _finite(value):
                out[f"{keys[row.metric]}.{suffix}"] = float(value)
    return out


def _calibrated(key: str, calibrated: Calibration | None) -> dict[str, float]:
    """A judge's mean calibrated by human labels and the ends of its 95% CI (none where the
    run had no labels, or the calibration was refused)."""
    if calibrated is None:
        return {}
    values = (calibrated.mean, *(calibrated.ci95 or (None, None)))
    return {f"{key}.{suffix}": float(value)  # type: ignore[arg-type]
            for suffix, value in zip(CALIBRATION_SUFFIXES, values, strict=True)
            if _finite(value)}


def _comparison_rows(gate: GateReport | None) -> list[Any]:
    return [row for row in (gate.rows if gate is not None else ()) if row.check == "regression"]


def run_params(results: Results, keys: Mapping[str, str]) -> dict[str, str]:
    """The settings that decide the run's values, and each value's full signature
    (``signature.<key>``), as MLflow params."""
    manifest = results.manifest
    records = manifest.get("records") or {}
    params: dict[str, Any] = {
        "metrics": ",".join(manifest.get("metrics") or results.summary),
        "records.source": records.get("source"),
        "records.count": records.get("count"),
        "judgments": manifest.get("judgments"),
        "trec_convention": manifest.get("trec_convention"),
    }
    inputs = records.get("inputs") or {}
    params.update({f"inputs.{k}": v for k, v in inputs.items() if _setting(v)})
    params.update({f"bootstrap.{k}": v for k, v in (manifest.get("bootstrap") or {}).items()})
    judge = manifest.get("judge") or {}
    params.update({f"judge.{k}": judge.get(k) for k in _JUDGE_PARAMS})
    methods = {s.ci_method for s in results.summary.values()}
    params["ci"] = ",".join(sorted(methods))
    params.update({f"{SIGNATURE_PREFIX}{keys[name]}": s.signature
                   for name, s in results.summary.items() if s.in_table and s.signature})
    return {key: _param_text(value) for key, value in params.items() if _setting(value)}


def _setting(value: Any) -> bool:
    """Whether a setting is worth a param: given, and not an empty collection."""
    return value is not None and value != {} and value != [] and value != ""


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= _PARAM_VALUE_CHARS else text[:_PARAM_VALUE_CHARS - 1] + "…"


def run_tags(results: Results, gate: GateReport | None) -> dict[str, str]:
    """Where the run came from and what it did: rageval's and its libraries' versions, when it
    was made, the records, and the gate's verdict."""
    manifest = results.manifest
    tags = {"rageval.version": manifest.get("rageval"), "rageval.created": manifest.get("created"),
            "rageval.records": (manifest.get("records") or {}).get("source"),
            "rageval.eval_file": (manifest.get("eval_file") or {}).get("path")}
    tags.update({f"versions.{k}": v for k, v in (manifest.get("versions") or {}).items()})
    if gate is not None:
        tags["rageval.gate"] = "passed" if gate.passed else "failed"
    if _comparison_rows(gate):
        tags["rageval.compared"] = "baseline"
    return {key: str(value) for key, value in tags.items() if value is not None}


def _log_values(client: MlflowClient, run_id: str, metrics: Mapping[str, float],
                params: Mapping[str, str]) -> None:
    """Metrics and params in batches of what one call takes (MLflow: 1000 metrics, 100
    params)."""
    import time

    from mlflow.entities import Metric, Param

    now = int(time.time() * 1000)
    entries = [Metric(k, v, now, 0) for k, v in metrics.items()]
    for start in range(0, len(entries), 1000):
        client.log_batch(run_id, metrics=entries[start:start + 1000])
    pairs = [Param(k, v) for k, v in params.items()]
    for start in range(0, len(pairs), 100):
        client.log_batch(run_id, params=pairs[start:start + 100])


class _RunFolder:
    """The run's folder: ``run_dir`` itself, or a temporary one its files are written to."""

    def __init__(self, results: Results, run_dir: str | Path | None) -> None:
        self.results, self.run_dir = results, run_dir
        self.temporary: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Path:
        if self.run_dir is not None:
            return Path(self.run_dir)
        self.temporary = tempfile.TemporaryDirectory(prefix="rageval-mlflow-")
        return self.results.write(self.temporary.name)

    def __exit__(self, *exc: object) -> None:
        if self.temporary is not None:
            self.temporary.cleanup()


def _row_json(row: Any) -> dict[str, Any]:
    """A comparison row as JSON (a number that is not one, a p-value not drawn: null)."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in asdict(row).items()}


def _artifact_files(folder: Path, results: Results, html_report: bool) -> list[Path]:
    """The files this run wrote to ``folder`` (a file of an earlier run there is left out)."""
    from rageval.core.results.conversations import CONVERSATIONS_FILE

    names = ["summary.json", "records.jsonl"]
    if "conversations" in results.manifest:
        names.append(CONVERSATIONS_FILE)
    if html_report:
        names.append("report.html")
    return [folder / name for name in names if (folder / name).is_file()]


def _log_artifacts(client: MlflowClient, run_id: str, files: list[Path], results: Results,
                   gate: GateReport | None, name: str, masker: Masker) -> list[str]:
    """The run's ``files``, and written beside them for the upload: the summary table of the
    run called ``name`` as Markdown (``summary.md``, with the baseline's columns when compared)
    and the comparison's rows (``comparison.json``)."""
    from rageval.gate.github import summary_markdown

    logged = []
    for path in files:
        client.log_artifact(run_id, str(path))
        logged.append(path.name)
    with tempfile.TemporaryDirectory(prefix="rageval-mlflow-") as extra:
        written = {"summary.md": summary_markdown(results, gate, name, masker)}
        rows = _comparison_rows(gate)
        if rows:
            written["comparison.json"] = json.dumps([_row_json(r) for r in rows], indent=2)
        for name, text in written.items():
            (Path(extra) / name).write_text(text, encoding="utf-8")
            client.log_artifact(run_id, str(Path(extra) / name))
            logged.append(name)
    return logged
