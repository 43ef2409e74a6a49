"""End-to-end benchmark: rageval's trec_eval against pytrec_eval (and optionally ranx).

Generates (once, cached) a seeded TREC qrels file and run file, then times each tool doing
the whole job a user asks of ``trec_eval -q``: read both files, compute map, ndcg_cut.10,
P.10, recall.100 and recip_rank, and write every per-query and summary value. Every timed
run happens in a fresh Python subprocess, so its wall time includes interpreter start-up and
imports, and its peak resident memory is measured for that process alone.

Afterwards the values are checked: the two timed outputs must name the same (measure, topic)
pairs with values equal to their printed precision, and a separate, untimed process compares
every per-query and summary value at full precision (tolerance 1e-9). All generated scores
are multiples of 1/64 written with six decimals, which single precision (what trec_eval and
pytrec_eval store) represents exactly, so both tools rank identically.

Run ``python bench/bench_trec.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
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
SIDES = ["pytrec_eval", "rageval"]
PRINTED_TOLERANCE = 1.0001e-4  # one unit in the 4th decimal: rounding of equal values
FULL_TOLERANCE = 1e-9
HERE = Path(__file__).resolve().parent


# --------------------------------------------------------------------------------------------
# Data generation
# --------------------------------------------------------------------------------------------


def data_paths(
    data_dir: Path, queries: int, docs: int, judged: int, seed: int
) -> tuple[Path, Path]:
    tag = f"{queries}q-{docs}d-{judged}j-seed{seed}"
    return data_dir / f"qrels-{tag}.txt", data_dir / f"run-{tag}.txt"


def generate(
    data_dir: Path, queries: int, docs: int, judged: int, seed: int, *, quiet: bool = False
) -> tuple[Path, Path]:
    """Write the qrels and run files unless they already exist; return their paths."""
    import numpy as np

    qrels_path, run_path = data_paths(data_dir, queries, docs, judged, seed)
    if qrels_path.exists() and run_path.exists():
        if not quiet:
            print(f"using cached data: {qrels_path.name}, {run_path.name}")
        return qrels_path, run_path
    data_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    n_from_run = min(docs, round(judged * 0.8))  # most judgments are of retrieved documents
    rank_weights = 1.0 / np.sqrt(np.arange(1, docs + 1))  # assessors see the top ranks more
    rank_weights /= rank_weights.sum()
    label_p = [0.5, 0.25, 0.15, 0.1]
    with (
        tempfile.NamedTemporaryFile("w", dir=data_dir, delete=False, suffix=".tmp") as qf,
        tempfile.NamedTemporaryFile("w", dir=data_dir, delete=False, suffix=".tmp") as rf,
    ):
        for q in range(queries):
            qid = str(401 + q)
            doc_ids = rng.choice(9_000_000, size=docs + judged, replace=False) + 1_000_000
            retrieved, spare = doc_ids[:docs], doc_ids[docs:]
            # Descending scores in a BM25-like range, multiples of 1/64: six exact decimals.
            scores = np.sort(rng.integers(2 * 64, 48 * 64, size=docs))[::-1] / 64.0
            rf.write(
                "".join(
                    f"{qid} Q0 doc{d} {r} {s:.6f} bench\n"
                    for r, (d, s) in enumerate(
                        zip(retrieved.tolist(), scores.tolist(), strict=True), start=1
                    )
                )
            )
            ranks = rng.choice(docs, size=n_from_run, replace=False, p=rank_weights)
            judged_ids = list(retrieved[ranks]) + list(spare[: judged - n_from_run])
            labels = rng.choice(4, size=len(judged_ids), p=label_p)
            qf.write(
                "".join(
                    f"{qid} 0 doc{d} {lab}\n" for d, lab in zip(judged_ids, labels, strict=True)
                )
            )
    for tmp, final in ((qf.name, qrels_path), (rf.name, run_path)):
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    if not quiet:
        print(
            f"generated {queries} queries x {docs} docs ({judged} judgments per query) "
            f"in {time.perf_counter() - start:.1f} s"
        )
    return qrels_path, run_path


# --------------------------------------------------------------------------------------------
# Workers (each runs in its own subprocess)
# --------------------------------------------------------------------------------------------


def _write_trec_lines(out: TextIO, per_query: dict[str, dict[str, float]]) -> None:
    """trec_eval -q layout: per-topic lines (topics sorted), then the summary."""
    for qid in sorted(per_query):
        values = per_query[qid]
        for name in MEASURE_NAMES:
            out.write(f"{name:<22}\t{qid}\t{values[name]:.4f}\n")


def worker_pytrec(qrels: str, run: str, output: str) -> None:
    import pytrec_eval

    with open(qrels) as fh:
        qrel = pytrec_eval.parse_qrel(fh)
    with open(run) as fh:
        ranking = pytrec_eval.parse_run(fh)
    evaluator = pytrec_eval.RelevanceEvaluator(qrel, MEASURE_ARGS)
    results = evaluator.evaluate(ranking)
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

    with open(qrels) as fh:
        qrel = pytrec_eval.parse_qrel(fh)
    with open(run) as fh:
        ranking = pytrec_eval.parse_run(fh)
    theirs = pytrec_eval.RelevanceEvaluator(qrel, MEASURE_ARGS).evaluate(ranking)
    del qrel, ranking
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


WORKERS = {
    "floor": worker_floor,
    "pytrec_eval": worker_pytrec,
    "rageval": worker_rageval,
    "ranx": worker_ranx,
    "verify": worker_verify,
}


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    """The benchmarked rageval is the one in this checkout, installed or not."""
    env = dict(os.environ)
    root = str(HERE.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def run_worker(side: str, qrels: Path, run: Path, output: Path) -> tuple[float, float]:
    """Run one worker in a fresh interpreter; return (wall seconds, peak RSS in MiB).

    A child's peak RSS as the kernel reports it also covers the address space it started
    from (the driver's, until exec), so the driver itself imports nothing heavy: data
    generation runs in its own process and ranx is looked up without importing it.
    """
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        side,
        str(qrels),
        str(run),
        str(output),
    ]
    err_path = output.with_suffix(".stderr")
    with err_path.open("w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=_child_env())
        # wait4 gives this child's own resource usage (RUSAGE_CHILDREN would merge all of them).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{side} worker failed with status {proc.returncode}:\n{err_path.read_text()[-3000:]}"
        )
    return wall, usage.ru_maxrss / 1024.0  # Linux reports KiB


def parse_output(path: Path) -> dict[tuple[str, str], float]:
    values: dict[tuple[str, str], float] = {}
    with path.open() as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 3:
                values[(parts[0], parts[1])] = float(parts[2])
    return values


def compare_outputs(a: Path, b: Path) -> dict[str, Any]:
    va, vb = parse_output(a), parse_output(b)
    common = va.keys() & vb.keys()
    diffs = [abs(va[k] - vb[k]) for k in common]
    worst = max(common, key=lambda k: abs(va[k] - vb[k]), default=None)
    return {
        "lines": len(va),
        "same_keys": va.keys() == vb.keys(),
        "only_in_first": sorted(va.keys() - vb.keys())[:5],
        "only_in_second": sorted(vb.keys() - va.keys())[:5],
        "identical_values": sum(1 for k in common if va[k] == vb[k]),
        "max_abs_diff": max(diffs, default=0.0),
        "worst": None if worst is None else [*worst, va[worst], vb[worst]],
        "agree": va.keys() == vb.keys() and max(diffs, default=0.0) <= PRINTED_TOLERANCE,
    }


def ranx_available() -> bool:
    # find_spec does not import it: the driver stays small (see run_worker).
    return importlib.util.find_spec("ranx") is not None


def ensure_data(args: argparse.Namespace) -> tuple[Path, Path]:
    """Generate the data in a child process unless cached (see run_worker on memory)."""
    paths = data_paths(args.data_dir, args.queries, args.docs, args.judged, args.seed)
    if all(p.exists() for p in paths):
        print(f"using cached data: {paths[0].name}, {paths[1].name}")
        return paths
    cmd = [sys.executable, str(Path(__file__).resolve()), "--generate-only"]
    cmd += ["--queries", str(args.queries), "--docs", str(args.docs)]
    cmd += ["--judged", str(args.judged), "--seed", str(args.seed)]
    cmd += ["--data-dir", str(args.data_dir)]
    subprocess.run(cmd, check=True)
    return paths


def print_table(results: dict[str, dict[str, Any]]) -> None:
    base = results["rageval"]
    header = f"{'side':<12} {'median s':>9} {'min s':>8} {'max s':>8} {'peak MB':>9} "
    header += f"{'time / rageval':>15} {'mem / rageval':>14}"
    print(header)
    print("-" * len(header))
    for side, r in results.items():
        print(
            f"{side:<12} {r['median_s']:>9.3f} {r['min_s']:>8.3f} {r['max_s']:>8.3f} "
            f"{r['peak_mb']:>9.1f} {r['median_s'] / base['median_s']:>14.2f}x "
            f"{r['peak_mb'] / base['peak_mb']:>13.2f}x"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000, help="number of topics")
    parser.add_argument("--docs", type=int, default=1_000, help="retrieved documents per topic")
    parser.add_argument("--judged", type=int, default=20, help="judgments per topic")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per side")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--data-dir", type=Path, default=HERE / "data", help="where generated files are cached"
    )
    parser.add_argument("--with-ranx", action="store_true", help="also time ranx if installed")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--worker", nargs=4, metavar=("SIDE", "QRELS", "RUN", "OUT"), help=argparse.SUPPRESS
    )
    parser.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        side, qrels, run, out = args.worker
        WORKERS[side](qrels, run, out)
        return 0
    if args.queries < 1 or args.docs < 1 or args.judged < 1 or args.repeats < 1:
        parser.error("--queries, --docs, --judged and --repeats must be positive")

    if args.generate_only:
        generate(args.data_dir, args.queries, args.docs, args.judged, args.seed)
        return 0
    qrels, run = ensure_data(args)
    sides = list(SIDES)
    if args.with_ranx:
        if ranx_available():
            sides.append("ranx")
        else:
            print("ranx is not installed; skipping it")
    print(
        f"measures: {' '.join(MEASURE_ARGS)}; {args.queries} topics x {args.docs} docs, "
        f"{args.repeats} repeat(s) per side, each in a fresh process "
        f"(python {platform.python_version()}, {os.cpu_count()} CPUs)"
    )

    times: dict[str, list[float]] = {s: [] for s in sides}
    peaks: dict[str, list[float]] = {s: [] for s in sides}
    with tempfile.TemporaryDirectory(prefix="bench-trec-") as tmp:
        outputs = {s: Path(tmp) / f"{s}.out" for s in sides}
        _, floor_mb = run_worker("floor", qrels, run, Path(tmp) / "floor.out")
        print(f"  bare interpreter peak: {floor_mb:.1f} MB")
        for i in range(args.repeats):
            order = sides if i % 2 == 0 else sides[::-1]  # alternate to spread cache effects
            for side in order:
                wall, peak = run_worker(side, qrels, run, outputs[side])
                times[side].append(wall)
                peaks[side].append(peak)
                print(f"  run {i + 1}/{args.repeats} {side:<12} {wall:8.3f} s {peak:9.1f} MB")
        printed = compare_outputs(outputs["pytrec_eval"], outputs["rageval"])
        ranx_printed = (
            compare_outputs(outputs["pytrec_eval"], outputs["ranx"]) if "ranx" in sides else None
        )
        verify_path = Path(tmp) / "verify.json"
        run_worker("verify", qrels, run, verify_path)
        full = json.loads(verify_path.read_text())

    results = {
        s: {
            "times_s": times[s],
            "median_s": statistics.median(times[s]),
            "min_s": min(times[s]),
            "max_s": max(times[s]),
            "peak_mb": max(peaks[s]),
        }
        for s in sides
    }
    print()
    print_table(results)
    ratio = results["pytrec_eval"]["median_s"] / results["rageval"]["median_s"]
    mem_ratio = results["pytrec_eval"]["peak_mb"] / results["rageval"]["peak_mb"]
    print(f"\npytrec_eval / rageval: {ratio:.2f}x wall time, {mem_ratio:.2f}x peak memory")

    print(
        f"\nprinted output: {printed['lines']} lines, same (measure, topic) pairs: "
        f"{printed['same_keys']}, identical values: {printed['identical_values']}, "
        f"max |diff| {printed['max_abs_diff']:.1e}"
    )
    print(
        f"full precision: {full['compared']} values over {full['topics']} topics, "
        f"same topics: {full['topics_equal']}, max |diff| {full['max_abs_diff']:.1e}, "
        f"{full['mismatch_count']} over {FULL_TOLERANCE:g}"
    )
    for name, pair in full["summary"].items():
        ours = pair["rageval"]
        ours_text = "missing" if ours is None else f"{ours:.12f}"
        print(f"  {name:<12} all  pytrec_eval {pair['pytrec_eval']:.12f}  rageval {ours_text}")
    if ranx_printed is not None:
        print(
            f"ranx vs pytrec_eval (informational, not checked; ranx breaks score ties its own "
            f"way): {ranx_printed['identical_values']}/{ranx_printed['lines']} printed values "
            f"identical, max |diff| {ranx_printed['max_abs_diff']:.1e}"
        )
    agree = printed["agree"] and full["agree"]
    if not agree:
        print("VALUES DISAGREE", file=sys.stderr)
        if full["mismatches"]:
            print(
                f"first mismatches [topic, measure, rageval, pytrec_eval]: "
                f"{full['mismatches'][:5]}",
                file=sys.stderr,
            )
        if not printed["agree"]:
            print(f"printed output: {printed}", file=sys.stderr)
    else:
        print("values agree")

    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "config": {
                        "queries": args.queries,
                        "docs": args.docs,
                        "judged": args.judged,
                        "repeats": args.repeats,
                        "seed": args.seed,
                        "measures": MEASURE_ARGS,
                        "python": sys.version.split()[0],
                    },
                    "sides": results,
                    "interpreter_floor_mb": floor_mb,
                    "ratio_time_pytrec_over_rageval": ratio,
                    "ratio_memory_pytrec_over_rageval": mem_ratio,
                    "printed_check": printed,
                    "full_check": full,
                    "ranx_printed_check": ranx_printed,
                    "agree": agree,
                },
                indent=2,
                default=str,
            )
        )
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
