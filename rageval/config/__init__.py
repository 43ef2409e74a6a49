"""Evaluation files: a run written down once in TOML (``rageval run eval.toml``)."""

from rageval.config.eval_file import EvalFile, read_eval_file

__all__ = ["EvalFile", "read_eval_file"]
