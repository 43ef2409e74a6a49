"""The options of a scoring run, shared by ``rageval score`` and ``rageval run``, as argparse
flags built from their declarations (:mod:`rageval.config.schema`, and the judge's on
:class:`~rageval.judge.llm.config.JudgeConfig`).

``score`` takes them with their defaults. ``run`` reads an evaluation file and takes the same
options as overrides: its parser leaves out every option not given (``argparse.SUPPRESS``), so
the flags given can be laid over the file's fields over :data:`DEFAULTS`.
"""

from __future__ import annotations

import argparse
from typing import Any

from rageval.config.schema import GATE, INPUTS, JUDGE_USES, MLFLOW, OTEL, SCORE_OPTIONS, SCORING
from rageval.core.options import add_options, defaults
from rageval.judge.llm.config import JUDGE_OPTIONS

# Every option whose default is not None (argparse's own), kept out of add_argument so that
# `run` can tell a flag given from a default.
DEFAULTS: dict[str, Any] = defaults(SCORE_OPTIONS)


def score_defaults() -> dict[str, Any]:
    """Every option of a scoring run at its default (what ``rageval score`` starts from)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_score_options(parser)
    parser.set_defaults(**DEFAULTS)
    return vars(parser.parse_args([]))


def add_score_options(p: argparse.ArgumentParser) -> None:
    """Every option of a scoring run (the records file itself is the caller's)."""
    add_options(p, SCORING)
    add_options(p.add_argument_group("inputs in other formats (see docs/inputs.md)"), INPUTS)
    judge = p.add_argument_group("judge (judge:<rubric> metrics, and claims:, nuggets:, "
                                 "citations:)")
    add_options(judge, (*JUDGE_OPTIONS, *JUDGE_USES))
    add_options(p.add_argument_group("gate (exit status 3 when a check fails; see "
                                     "docs/gate.md)"), GATE)
    add_options(p.add_argument_group("MLflow (see docs/mlflow.md)"), MLFLOW)
    add_options(p.add_argument_group("OpenTelemetry evaluation events (see "
                                     "docs/otel-events.md)"), OTEL)
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="always show progress bars")
    bar.add_argument("--no-progress", dest="progress", action="store_false",
                     help="never show progress bars (default: on a terminal)")
