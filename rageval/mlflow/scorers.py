"""rageval's metrics as MLflow scorers, for ``mlflow.genai.evaluate``: a team that keeps its
evaluations in MLflow runs them there.

:func:`scorer` makes one MLflow scorer of a rageval metric (``scorer("ndcg@10")``,
``scorer("judge:faithfulness", judge=JudgeOptions(...))``); MLflow calls it once per row of
its evaluation data, and the row is read as a rageval record (:func:`record_of`):

``inputs``
    the query: a string, or a mapping with ``query`` (and ``id``, ``contexts``, and any other
    field of the record's own, kept as it is);
``outputs``
    the answer: a string, or a mapping with ``answer`` (or ``response``), ``contexts`` (the
    retrieved contexts in rank order as a record gives them) and ``tool_calls``;
``expectations``
    ``reference`` (or MLflow's ``expected_response``), ``judgments`` (doc id -> grade) and
    ``reference_tool_calls``.

A row is one record on its own, with no conversation: a metric that grades whole
conversations (``judge:resolution``, ``judge:consistency``, ``tools:f1(scope=conversation)``)
is refused when its scorer is made, and a turn-level rubric that shows a turn's conversation
sees none.

The value MLflow records is the metric's headline value on that record, on the metric's own
scale (a rubric's 1-5); a judge's reasoning is the rationale, and a record the metric leaves
unscored is an error giving why. :func:`judge_scorers` makes one per judge rubric, and
:func:`eval_data` turns rageval records into MLflow's rows.
The scorer's name is the metric's MLflow key (:mod:`rageval.mlflow.names`: ``ndcg_at_10``,
``judge/faithfulness``), so the means MLflow logs are ``ndcg_at_10/mean`` and the like.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rageval.core.errors import MissingDependencyError, UsageError
from rageval.mlflow.names import metric_key

if TYPE_CHECKING:
    from mlflow.entities import Feedback
    from mlflow.genai.scorers import Scorer

    from rageval.core.records import Record
    from rageval.judge.llm.options import JudgeOptions

__all__ = ["eval_data", "judge_scorers", "record_of", "scorer", "scorers"]

_ANSWER_KEYS = ("answer", "response")
_REFERENCE_KEYS = ("reference", "references", "expected_response")
_EXPECTED = ("reference", "judgments", "reference_tool_calls")


def scorer(metric: str, *, judge: JudgeOptions | None = None, name: str | None = None) -> Scorer:
    """An MLflow scorer scoring each row with ``metric`` (any name ``rageval score -m``
    takes); ``judge``: the judge's options for a judge metric (offline from a cache too);
    ``name``: the scorer's name (default: the metric's MLflow key)."""
    try:
        from mlflow.genai.scorers import scorer as mlflow_scorer
    except ImportError:
        raise MissingDependencyError("mlflow", "mlflow") from None
    _check_metric(metric, judge)

    def score(inputs: Any = None, outputs: Any = None, expectations: Any = None) -> Feedback:
        return _feedback(metric, judge, record_of(inputs, outputs, expectations))

    score.__name__ = metric_key(metric).replace("/", "_").replace(".", "_")
    return mlflow_scorer(score, name=name or metric_key(metric),
                         description=f"rageval's {metric}")


def scorers(metrics: Iterable[str], *, judge: JudgeOptions | None = None) -> list[Scorer]:
    """One scorer per metric (:func:`scorer`), with the same judge."""
    return [scorer(metric, judge=judge) for metric in metrics]


def judge_scorers(judge: JudgeOptions) -> list[Scorer]:
    """One scorer per judge rubric (``judge:<rubric>``: the built-in ones and those of the
    judge's ``prompts_dir``), each asking ``judge``; the pairwise comparison, which needs a
    second system's answers, and the rubrics of whole conversations, which a row is not, are
    not among them."""
    from rageval.core.metric import ScoreOptions
    from rageval.core.registry import create
    from rageval.judge.rubric.rubrics import list_rubrics

    names = [f"judge:{name}" for name in list_rubrics(judge.prompts_dir) if name != "pairwise"]
    return [scorer(name, judge=judge) for name in names
            if create(name, ScoreOptions(judge=judge)).level != "conversation"]


def _check_metric(metric: str, judge: JudgeOptions | None) -> None:
    """The metric's name and options checked when the scorer is made, not on MLflow's first
    row (where an error becomes one failed assessment per row)."""
    from rageval.core.metric import ScoreOptions
    from rageval.core.registry import create, parse_name

    if parse_name(metric).namespace == "judge" and (judge is None or not judge.model):
        raise UsageError(f"{metric} needs a judge: scorer({metric!r}, "
                         "judge=JudgeOptions(model=..., ...))")
    if create(metric, ScoreOptions(judge=judge)).level == "conversation":
        raise UsageError(f"{metric} grades whole conversations, and a row of "
                         "mlflow.genai.evaluate is one record on its own: score the "
                         "conversations with rageval score")


def _feedback(metric: str, judge: JudgeOptions | None, record: Record) -> Feedback:
    """The metric's headline value on ``record`` as MLflow feedback."""
    from mlflow.entities import Feedback

    from rageval.api import evaluate

    # One record: its value is all MLflow keeps, so the bootstrap draws the least it may.
    results = evaluate([record], [metric], bootstrap=1, judge=judge)
    headline = next(iter(results.summary))
    scored = results.records[0]
    value = scored.scores.get(headline)
    if value is None:
        reason = scored.errors.get(headline) or next(iter(scored.errors.values()), "unscored")
        return Feedback(error=f"unscored: {reason}")
    details = scored.details.get(headline) or {}
    rationale = details.get("reasoning") if isinstance(details, Mapping) else None
    return Feedback(value=value, rationale=rationale if isinstance(rationale, str) else None)


def record_of(inputs: Any, outputs: Any, expectations: Any = None) -> Record:
    """The rageval record of one row of MLflow's evaluation data (this module's docstring);
    a row that is not one is an error naming the field."""
    from rageval.core.records import records_from_dicts

    item: dict[str, Any] = {"id": "row"}
    item.update(_part(inputs, "query", "inputs"))
    item.update(_part(outputs, "answer", "outputs", _ANSWER_KEYS))
    given = _part(expectations, "reference", "expectations", _REFERENCE_KEYS)
    item.update({k: v for k, v in given.items() if k in _EXPECTED})
    return records_from_dicts([item], source="mlflow.genai.evaluate row")[0]


def _part(value: Any, text_field: str, where: str,
          aliases: Sequence[str] = ()) -> dict[str, Any]:
    """One of a row's three parts as record fields: a string is ``text_field``; a mapping's
    keys are fields, its ``aliases`` read as ``text_field``."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {text_field: value}
    if not isinstance(value, Mapping):
        raise UsageError(f"mlflow.genai.evaluate row: {where} must be a string or a mapping, "
                         f"got {type(value).__name__}")
    out = {k: v for k, v in value.items() if k not in aliases}
    for alias in aliases:
        if value.get(alias) is not None:
            out[text_field] = value[alias]
            break
    return out


def eval_data(records: Iterable[Record] | str | os.PathLike[str]) -> list[dict[str, Any]]:
    """rageval records (or a records file) as rows of ``mlflow.genai.evaluate``'s data:
    ``inputs`` the id, query and the record's other fields, ``outputs`` the answer, contexts
    and tool calls, ``expectations`` the reference, judgments and expected tool calls;
    :func:`record_of` reads a row back as the record."""
    from rageval.core.records import load_records

    if isinstance(records, str | os.PathLike):
        records = load_records(records)
    rows = []
    for record in records:
        data = record.to_dict()
        outputs = {k: data.pop(k) for k in ("answer", "contexts", "tool_calls") if k in data}
        expected = {k: data.pop(k) for k in _EXPECTED if k in data}
        row: dict[str, Any] = {"inputs": data, "outputs": outputs}
        if expected:
            row["expectations"] = expected
        rows.append(row)
    return rows
