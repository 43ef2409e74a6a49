"""The workers of bench_trec.py: each side's whole job, run in a fresh process.

pytrec_eval used as it usually is (nested dictionaries, RelevanceEvaluator, the aggregate),
rageval's ``trec-eval`` command, ranx, and the untimed full-precision check.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TextIO

MEASURE_ARGS = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]
# Names under which trec_eval prints the measures above.
MEASURE_NAMES = ["map", "ndcg_cut_10", "P_10", "recall_100", "recip_rank"]
RANX_METRICS = {
    "map": "map",
    "ndcg_cut_10": "ndcg@10",
    "P_10": "precision@10",
    "recall_100": "recall@100",
    "recip_rank": "mrr",
}
FULL_TOLERANCE = 1e-9


def _write_trec_lines(out: TextIO, per_query: dict[str, dict[str, float]]) -> None:
    """trec_eval -q layout: per-topic lines (topics sorted), then the summary."""
    for qid in sorted(per_query):
        values = per_query[qid]
        for name in MEASURE_NAMES:
            out.write(f"{name:<22}\t{qid}\t{values[name]:.4f}\n")


def _pytrec_values(qrels: str, run: str) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-topic values, used as it usually is (files parsed into dicts)."""
    import pytrec_eval

    with open(qrels) as fh:
        qrel = pytrec_eval.parse_qrel(fh)
    with open(run) as fh:
        ranking = pytrec_eval.parse_run(fh)
    values: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(
        qrel, MEASURE_ARGS).evaluate(ranking)
    return values


def worker_pytrec(qrels: str, run: str, output: str) -> None:
    import pytrec_eval

    results = _pytrec_values(qrels, run)
    with open(output, "w") as out:
        _write_trec_lines(out, results)
        for name in MEASURE_NAMES:
            value = pytrec_eval.compute_aggregated_measure(
                name, [v[name] for v in results.values()]
            )
            out.write(f"{name:<22}\tall\t{value:.4f}\n")


def rageval_argv(qrels: str, run: str) -> list[str]:
    argv = ["-q"]
    for m in MEASURE_ARGS:
        argv += ["-m", m]
    return [*argv, qrels, run]


def worker_rageval(qrels: str, run: str, output: str) -> None:
    """``rageval trec-eval -q -m ... QRELS RUN`` through the command-line entry point."""
    from rageval import cli

    with open(output, "w") as out:
        status = cli.main(["trec-eval", *rageval_argv(qrels, run)], stdout=out)
    if status:
        raise SystemExit(status)


def worker_ranx(qrels: str, run: str, output: str) -> None:
    from ranx import Qrels, Run, evaluate

    qrel = Qrels.from_file(qrels, kind="trec")
    ranking = Run.from_file(run, kind="trec")
    metrics = list(RANX_METRICS.values())
    scores = evaluate(qrel, ranking, metrics, return_mean=False)
    qids = list(ranking.get_query_ids())  # the order of ranx's per-query arrays
    per_query = {
        qid: {name: float(scores[metric][i]) for name, metric in RANX_METRICS.items()}
        for i, qid in enumerate(qids)
    }
    with open(output, "w") as out:
        _write_trec_lines(out, per_query)
        for name in MEASURE_NAMES:
            value = math.fsum(v[name] for v in per_query.values()) / len(per_query)
            out.write(f"{name:<22}\tall\t{value:.4f}\n")


def worker_verify(qrels: str, run: str, output: str) -> None:
    """Untimed: every value from both tools at full precision."""
    import pytrec_eval

    from rageval.retrieval import trec_eval

    theirs = _pytrec_values(qrels, run)
    ours = trec_eval.evaluate_files(qrels, run, MEASURE_ARGS)
    theirs_all = {
        name: pytrec_eval.compute_aggregated_measure(name, [v[name] for v in theirs.values()])
        for name in MEASURE_NAMES
    }
    report: dict[str, Any] = {"compared": 0, "max_abs_diff": 0.0, "mismatches": []}

    def check(qid: str, name: str, want: float) -> None:
        got = ours.get(qid, {}).get(name)
        report["compared"] += 1
        if got is None:
            report["mismatches"].append([qid, name, None, want])
            return
        diff = abs(got - want)
        report["max_abs_diff"] = max(report["max_abs_diff"], diff)
        if diff > FULL_TOLERANCE:
            report["mismatches"].append([qid, name, got, want])

    our_topics = {q for q in ours if q != "all"}
    report["topics_equal"] = our_topics == set(theirs)
    report["topics"] = len(theirs)
    for qid, values in theirs.items():
        for name in MEASURE_NAMES:
            check(qid, name, values[name])
    for name in MEASURE_NAMES:
        check("all", name, theirs_all[name])
    report["summary"] = {
        name: {"pytrec_eval": theirs_all[name], "rageval": ours.get("all", {}).get(name)}
        for name in MEASURE_NAMES
    }
    report["mismatch_count"] = len(report["mismatches"])
    report["mismatches"] = report["mismatches"][:20]
    report["agree"] = report["topics_equal"] and not report["mismatch_count"]
    Path(output).write_text(json.dumps(report, indent=2))


def worker_floor(qrels: str, run: str, output: str) -> None:
    """Does nothing: the peak memory of a bare interpreter running this script."""


def worker_parse_floor(qrels: str, run: str, output: str) -> None:
    """The least any tool reading the run with polars does: import polars and read the run's
    three columns a measure needs (topic, document, score). No ranking, no measure, no output
    but the row count: the time the trec-eval command is held against."""
    import polars as pl

    frame = pl.read_csv(run, separator=" ", has_header=False, columns=[0, 2, 4],
                        schema_overrides={"column_1": pl.String, "column_3": pl.String,
                                          "column_5": pl.Float64})
    Path(output).write_text(f"{frame.height}\n")


WORKERS = {
    "floor": worker_floor,
    "parse_floor": worker_parse_floor,
    "pytrec_eval": worker_pytrec,
    "rageval": worker_rageval,
    "ranx": worker_ranx,
    "verify": worker_verify,
}
