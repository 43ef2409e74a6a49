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

This module holds the entry points (:func:`agree_runs`, :func:`run_agree`). The statistics are
in :mod:`~rageval.stats.agreement`, the loading and matching of runs and human labels in
:mod:`~rageval.compare.agree.inputs`, the report's rows in :mod:`~rageval.compare.agree.report`
and its printing in :mod:`~rageval.compare.agree.output`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

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
from rageval.core.errors import UsageError
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
    "agree_runs",
    "agreement",
    "kendall_tau_b",
    "quadratic_kappa",
    "render_agreement",
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
    :class:`InputError` naming the record and the field.
    """
    if dir_b is None and human is None:
        raise UsageError("agree needs a second run directory or --human FIELD to compare with")
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
    rows: list[AgreementRow] = []
    for name_a, name_b in pairs:
        rows.extend(metric_rows(run_a, run_b, labels, name_a, name_b, ids, notes))
    return AgreementReport(tuple(raters), tuple(rows), records, tuple(notes))
