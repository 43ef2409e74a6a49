"""trec_eval 10.0's measures, exactly: what ``rageval trec-eval`` evaluates with (its command
line, a drop-in with byte-identical output, is :mod:`rageval.cli.trec_eval_command`).

- :mod:`.catalogue`: the measures (:data:`MEASURES`) and their nicknames (:data:`NICKNAMES`);
- :mod:`.selection`: ``-m`` arguments resolved into measures and parameters;
- :mod:`.options`: the command line's options, and the start of reading a run in slices;
- :mod:`.evaluation`: a qrels and a run evaluated (:func:`evaluate_files`), with
  :mod:`.stops` (where trec_eval 10.0 stops), :mod:`.per_topic` (each topic's values and the
  summary), :mod:`.judgment_groups` (``-R qrels_jg``) and :mod:`.zscores` (``-Z``);
- :mod:`.output`: trec_eval's output lines.

:func:`evaluate_files` raises :class:`UsageError` for a bad measure or option.

The names below are imported on first use: importing :mod:`.options` then loads the TREC
readers only, so that ``rageval trec-eval`` reads its run's first slices while the measures'
modules load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rageval.core.errors import UsageError
    from rageval.retrieval.trec_eval.catalogue import MEASURES, NICKNAMES, Measure
    from rageval.retrieval.trec_eval.evaluation import evaluate_files
    from rageval.retrieval.trec_eval.selection import select_measures

__all__ = [
    "MEASURES",
    "NICKNAMES",
    "Measure",
    "UsageError",
    "evaluate_files",
    "select_measures",
]


def __getattr__(name: str) -> Any:
    if name == "UsageError":
        from rageval.core.errors import UsageError

        return UsageError
    if name in ("MEASURES", "NICKNAMES", "Measure"):
        from rageval.retrieval.trec_eval import catalogue

        return getattr(catalogue, name)
    if name == "evaluate_files":
        from rageval.retrieval.trec_eval.evaluation import evaluate_files

        return evaluate_files
    if name == "select_measures":
        from rageval.retrieval.trec_eval.selection import select_measures

        return select_measures
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
