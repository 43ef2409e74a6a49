"""Where trec_eval 10.0 stops instead of printing a summary, and with which exit status.

It evaluates the topics of the qrels in ``strcmp`` order and stops (exit 4) at the first it
cannot evaluate: a topic without results (without ``-c``), a document retrieved or judged twice,
a first topic judged all below 0, or a measure its judgments cannot serve (``-R qrels_jg``).
With ``-q`` it has printed the topics before that one. With no topic evaluated it exits 7.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from rageval.core.errors import RagevalError
from rageval.retrieval.trec import Qrels, Run
from rageval.retrieval.trec_eval.selection import SelectedMeasure


class TopicStop(RagevalError):
    """trec_eval 10.0 stops at topic ``qid`` with exit status 4. It has printed, with ``-q``,
    the values of the topics before it (``partial``: their qids and results, or None)."""

    exit_code = 4

    def __init__(self, message: str, qid: str) -> None:
        super().__init__(message)
        self.qid = qid
        self.partial: tuple[tuple[str, ...], list] | None = None

    def earlier(self, other: TopicStop | None) -> TopicStop:
        """Whichever of the two stops trec_eval meets first."""
        if other is None or self.qid.encode() < other.qid.encode():
            return self
        return other


class NoTopicEvaluated(RagevalError):
    """trec_eval 10.0 evaluated no topic (``-D`` naming a topic it does not evaluate): exit 7."""

    exit_code = 7


def unanswered(qrels: Qrels, run: Run, only_qid: str | None) -> TopicStop | None:
    """The first qrels topic (strcmp order) the run has no line for, as trec_eval's stop."""
    answered = set(run.qid_layout().names)
    missing = [q for q in qrels.qids() if q not in answered and only_qid in (None, q)]
    if not missing:
        return None
    first = min(missing, key=str.encode)
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    return TopicStop(
        f"qrels topic '{first}'{more} has no results in the run: trec_eval 10.0 stops there "
        "with exit status 4 (its message reads \"result qid '" + first + "' not found in "
        "qrels\"); -c scores such topics as retrieving nothing", first)


def first_evaluated(qrels: Qrels, run: Run, all_queries: bool,
                    only_qid: str | None) -> str | None:
    answered = set(run.qid_layout().names)
    evaluated = [q for q in qrels.qids() if (all_queries or q in answered)
                 and only_qid in (None, q)]
    return min(evaluated, key=str.encode) if evaluated else None


def negative_first_topic(qrels: Qrels, first: str | None) -> TopicStop | None:
    """trec_eval 10.0 sizes a per-grade table by the topic's highest grade plus one, and its
    allocator hands back no table for a size of 0 until some topic has needed one: so when the
    first topic it evaluates judges every document below 0, it stops there (exit 4). (Its
    judgment-group reader counts grades from 0 up, and never stops so.)"""
    if first is None:
        return None
    top = qrels.frame.filter(pl.col("qid") == first).get_column("rel").max()
    if top is None or int(top) >= 0:  # type: ignore[arg-type]
        return None
    return TopicStop(
        f"qrels topic '{first}', the first evaluated, judges every document below 0: trec_eval "
        "10.0 cannot calculate its measures there and stops with exit status 4", first)


def unservable(selected: Sequence[SelectedMeasure], groups: bool,
               first: str | None) -> TopicStop | None:
    """A measure the judgments cannot serve: trec_eval 10.0 fails it on the first topic it
    evaluates ("Can't calculate measure") and stops there (exit 4)."""
    for sel in selected:
        m = sel.measure
        if m.name == "utility" and len(sel.params) != 4 and first is not None:
            return TopicStop(f"utility needs exactly 4 coefficients (-m utility.a,b,c,d), got "
                             f"{len(sel.params)}: trec_eval 10.0 cannot calculate it and stops "
                             "with exit status 4", first)
        if m.kind in ("runid", "num_q") or m.groups == groups or first is None:
            continue
        needs = "judgment groups (-R qrels_jg)" if m.groups else "plain qrels (-R qrels)"
        return TopicStop(
            f"measure '{m.name}' needs {needs}: trec_eval 10.0 cannot calculate it and stops "
            "with exit status 4" + (" (use -m qrels_jg with -R qrels_jg)" if groups else ""),
            first)
    return None
