"""``--mlflow-tracking-uri``, ``--mlflow-experiment``: checked before a run scores anything
(MLflow installed, every metric with a key of its own, a tracking store MLflow can open and,
a server, one that answers), the run logged once its results are written (see
:mod:`rageval.mlflow`)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rageval.cli.gate_step import output_names
from rageval.core.errors import MissingDependencyError, RagevalError, UsageError
from rageval.core.outputs.masking import NO_SECRETS
from rageval.core.outputs.text import terminal, terminal_lines

if TYPE_CHECKING:
    from rageval.core.outputs.masking import Masker
    from rageval.core.results import Results
    from rageval.gate import GateReport
    from rageval.judge.llm.options import JudgeOptions

__all__ = ["MlflowTarget", "log_step", "mlflow_target"]


@dataclass(frozen=True)
class MlflowTarget:
    """Where the run is logged: the tracking store and the experiment; ``html_report``:
    whether the run writes its HTML report (``--report``), uploaded with its files."""

    uri: str
    experiment: str
    html_report: bool = False


def mlflow_target(args: argparse.Namespace, judge: JudgeOptions | None) -> MlflowTarget | None:
    """The run's MLflow target from its options (the tracking URI from MLFLOW_TRACKING_URI
    when only the experiment is given); None when the run is not logged. The store is opened
    and a server's health checked now, so that a URI MLflow cannot use is said before a
    possibly long run scores anything."""
    uri = getattr(args, "mlflow_tracking_uri", None)
    experiment = getattr(args, "mlflow_experiment", None)
    if uri is None and experiment is None:
        return None
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        raise UsageError("--mlflow-experiment logs the run to MLflow: give the tracking store "
                         "with --mlflow-tracking-uri URI or MLFLOW_TRACKING_URI")
    if importlib.util.find_spec("mlflow") is None:
        raise MissingDependencyError("mlflow", "mlflow")
    from rageval.mlflow.names import metric_keys
    from rageval.mlflow.tracking import DEFAULT_EXPERIMENT, open_store

    metric_keys(output_names(args.metrics, judge))  # two names on one key: refused now
    open_store(uri)
    experiment = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    return MlflowTarget(uri, experiment, bool(getattr(args, "report", None)))


def log_step(target: MlflowTarget | None, results: Results, out: str | None, name: str,
             report: GateReport | None, masker: Masker = NO_SECRETS) -> bool:
    """Log the run to ``target`` and say on stderr where it went; False (the error said) when
    the tracking store could not take it: the run's results stand."""
    if target is None:
        return True
    from rageval.mlflow.tracking import log_run, shown_uri

    where = f"experiment {target.experiment!r} at {shown_uri(target.uri)}"
    try:
        logged = log_run(results, out, target.uri, target.experiment, gate=report,
                         run_name=Path(name).name or name, html_report=target.html_report,
                         masker=masker)
    except RagevalError as error:
        kept = f"in {out}" if out else "on the terminal only (no --out)"
        text = f"{error.format()} (the run was not logged to MLflow; its results stand {kept})"
        print(terminal_lines(masker(text)), file=sys.stderr)
        return False
    print(terminal(masker(f"logged MLflow run {logged.run_id} to {where}: {logged.metrics} "
                          f"metrics, {logged.params} params, artifacts "
                          f"{', '.join(logged.artifacts)}")), file=sys.stderr)
    return True
