"""Judge agreement: how closely two judges, or a judge and human labels, agree.

``rageval agree DIR_A DIR_B [--human FIELD]`` answers the question a user asks before trusting a
judge prompt or model: on the records both raters scored, how often do they give the same grade,
and how well do they order the records? For every judge metric the raters share it reports:

* ``n``: records compared (records unscored on either side, or without a human label, are left
  out and counted by reason: unscored is not zero);
* exact agreement (share of equal grades) and adjacent agreement (grades at most 1 apart);
* Cohen's kappa with quadratic weights over the rubric's full scale (chance-corrected, and a
  disagreement of 1 costs far less than one of 4);
* Spearman's rho (average ranks for ties) and Kendall's tau-b (the tie-corrected tau);
* the confusion matrix over the full scale (rows the first rater, columns the second), the two
  means and their difference (first minus second).

Judge scores are integers on the rubric's scale, except when a run averaged several samples:
such means are rounded half up for the grade-based statistics (exact and adjacent agreement,
kappa, confusion matrix), and the report says how many were; the correlations use raw values.

This module holds the entry points (:func:`agree_runs`; :func:`run_agree` and
:func:`agree_command`, the command that prints and writes it). The statistics are
in :mod:`~rageval.stats.agreement`, the loading and matching of runs and human labels in
:mod:`~rageval.compare.agree.inputs`, the report's rows in :mod:`~rageval.compare.agree.report`
and its printing in :mod:`~rageval.compare.agree.output`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TextIO

from rageval.compare.agree.inputs import (
    HUMAN,
    HumanLabels,
    Rater,
    human_labels_path,
    load_run,
    pair_metrics,
    pair_record_ids,
    select_metric,
)
from rageval.compare.agree.output import render_agreement
from rageval.compare.agree.report import AgreementReport, AgreementRow, metric_rows
from rageval.compare.command_output import console_for, write_json_file
from rageval.core.errors import UsageError
from rageval.core.outputs.text import terminal
from rageval.stats.agreement import (
    Agreement,
    agreement,
    kendall_tau_b,
    quadratic_kappa,
    spearman_rho,
)

__all__ = [
    "Agreement",
    "AgreementReport",
    "AgreementRow",
    "Rater",
    "agree_command",
    "agree_runs",
    "agreement",
    "kendall_tau_b",
    "parse_pair",
    "quadratic_kappa",
    "render_agreement",
    "run_agree",
    "spearman_rho",
]


def agree_runs(
    dir_a: str | os.PathLike[str],
    dir_b: str | os.PathLike[str] | None = None,
    *,
    human: str | None = None,
    records_path: str | os.PathLike[str] | None = None,
    metric_pairs: Sequence[tuple[str, str]] | None = None,
    intersect: bool = False,
    metric: str | None = None,
    human_labels: str | os.PathLike[str] | None = None,
) -> AgreementReport:
    """Compare the judge metrics of run ``dir_a`` with run ``dir_b`` and/or human labels.

    Two runs are paired by record id: differing id sets are a :class:`UsageError` naming the
    ids, unless ``intersect`` compares the common records (the report counts those dropped).
    Judge metrics with the same name in both runs are compared; ``metric_pairs`` pairs names
    that differ because the runs used different rubric files (``("judge:a", "judge:b")``).

    ``human`` names a top-level field of the records file the run scored (its manifest's
    ``records.source``, or ``records_path``) holding either one number (when one metric is
    compared; choose it with ``metric``) or an object mapping criterion names (with or without
    ``judge:``) to numbers. Each run is then compared with the humans, and two runs with each
    other as well. Missing labels are left out and counted; a non-numeric label is an
    :class:`InputError` naming the record and the field. ``human_labels`` names a labels file
    (``rageval annotate``'s) to compare with instead of ``human``, read as ``rageval score``
    reads it: metrics named as a run scored them or by the names the label keys accept
    (``faithfulness`` for ``judge:faithfulness``), one label per annotator, record and metric
    (the later line when two names of one metric collide), averaged across annotators; a label
    off the scale is an :class:`InputError` naming the file, the line and the field. Labels
    of records the compared runs lack are left out, counted in the notes and in the records
    counts (``labels_of_other_records``); labels chosen by active selection are compared
    unweighted (agreement on the records labelled), and the notes say so.
    """
    if dir_b is None and human is None and human_labels is None:
        raise UsageError("agree needs a second run directory or --human FIELD (or "
                         "--human-labels FILE) to compare with")
    if human is not None and human_labels is not None:
        raise UsageError(f"--human {human} and --human-labels {os.fspath(human_labels)} both "
                         "give human labels: give one")
    if metric_pairs and dir_b is None:
        raise UsageError("--pair pairs the metrics of two runs: give a second run directory")
    run_a = load_run(dir_a, "A")
    run_b = None if dir_b is None else load_run(dir_b, "B")
    notes: list[str] = []
    ids, records = pair_record_ids(run_a, run_b, intersect, notes)
    pairs = select_metric(pair_metrics(run_a, run_b, metric_pairs), metric)
    raters = [run_a.rater] + ([] if run_b is None else [run_b.rater])
    labels: HumanLabels | None = None
    if human is not None:
        labels = HumanLabels.load(human, human_labels_path(run_a, run_b, records_path, notes),
                                  ids, pairs)
        raters.append(Rater(HUMAN, labels.path, field=human))
    elif human_labels is not None:
        labels = HumanLabels.from_file(os.fspath(human_labels), ids, pairs)
        raters.append(Rater(HUMAN, labels.path, labels_file=True))
        if labels.lines is not None:
            notes.extend(labels.lines.notes())
            if labels.lines.other_ids:
                records["labels_of_other_records"] = sum(labels.lines.other_ids.values())
    rows: list[AgreementRow] = []
    for name_a, name_b in pairs:
        rows.extend(metric_rows(run_a, run_b, labels, name_a, name_b, ids, notes))
    return AgreementReport(tuple(raters), tuple(rows), records, tuple(notes))


def parse_pair(text: str) -> tuple[str, str]:
    """``"judge:a=judge:b"`` -> ``("judge:a", "judge:b")``; an ``=`` inside parentheses
    belongs to a metric parameter (``judge:f(samples=3)``), not to the pair."""
    depth = 0
    split = None
    for index, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if char == "=" and depth == 0:
            if split is not None:
                split = -1
                break
            split = index
    if split is None or split < 0 or not text[:split].strip() or not text[split + 1:].strip():
        raise UsageError(f"--pair expects METRIC_A=METRIC_B, got {text!r}")
    return text[:split].strip(), text[split + 1:].strip()


def run_agree(
    dir_a: str,
    dir_b: str | None,
    human: str | None,
    records_path: str | None,
    pairs: Sequence[str | tuple[str, str]] | None,
    intersect: bool,
    json_path: str | None,
    out: TextIO,
    *,
    metric: str | None = None,
    human_labels: str | None = None,
) -> int:
    """``rageval agree``: compute, print to ``out``, write JSON (atomically) when asked."""
    parsed = [p if isinstance(p, tuple) else parse_pair(p) for p in pairs or ()]
    report = agree_runs(dir_a, dir_b, human=human, records_path=records_path,
                        metric_pairs=parsed or None, intersect=intersect, metric=metric,
                        human_labels=human_labels)
    console = console_for(out)
    render_agreement(report, console)
    if json_path is not None:
        write_json_file(report.to_json(), json_path)
        console.print(terminal(f"wrote {json_path}"), markup=False, highlight=False)
    return 0


def agree_command(args: argparse.Namespace, out: TextIO) -> int:
    """``rageval agree`` from its parsed arguments (the parser's handler)."""
    return run_agree(args.run_a, args.run_b, args.human, args.records, args.pair,
                     args.intersect, args.json, out, metric=args.metric,
                     human_labels=args.human_labels)
