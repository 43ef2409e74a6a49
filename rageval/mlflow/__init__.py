"""rageval and MLflow: a scored run logged as an MLflow run (:mod:`rageval.mlflow.tracking`,
``rageval score --mlflow-tracking-uri URI``), and rageval's metrics as scorers for
``mlflow.genai.evaluate`` (:mod:`rageval.mlflow.scorers`)::

    import mlflow, rageval.mlflow
    mlflow.genai.evaluate(data=rageval.mlflow.eval_data("records.jsonl"),
                          scorers=[rageval.mlflow.scorer("ndcg@10")])

Metric names become MLflow keys by :mod:`rageval.mlflow.names`. MLflow itself (the ``mlflow``
extra) is imported only when a run is logged or a scorer made: importing this package does not
load it.
"""

from __future__ import annotations

from rageval.mlflow.names import metric_key, metric_keys
from rageval.mlflow.scorers import eval_data, judge_scorers, record_of, scorer, scorers
from rageval.mlflow.tracking import LoggedRun, log_run

__all__ = ["LoggedRun", "eval_data", "judge_scorers", "log_run", "metric_key", "metric_keys",
           "record_of", "scorer", "scorers"]
