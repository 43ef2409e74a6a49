"""End-to-end benchmark: rageval's trec_eval against pytrec_eval (and optionally ranx and
trec_eval 10.0 itself).

Generates (once, cached) a seeded TREC qrels file and run file, then times each tool doing
the whole job a user asks of ``trec_eval -q``: read both files, compute map, ndcg_cut.10,
P.10, recall.100 and recip_rank, and write every per-query and summary value. Beside them it
times the parse floor, a process that only imports polars and reads the run's three needed
columns: what rageval's time is held against. Every timed
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
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The parse floor: a process that imports polars and reads the run's three columns, the
# least any polars-based reader does (trec_bench_workers.worker_parse_floor).
SIDES = ["pytrec_eval", "rageval", "parse_floor"]
#: What rageval's trec-eval aims at: within this factor of the parse floor, end to end (and the
#: stretch goal).
FLOOR_GOAL = 1.4
FLOOR_STRETCH = 1.3
PRINTED_TOLERANCE = 1.0001e-4  # one unit in the 4th decimal: rounding of equal values
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # for trec_bench_data, also when loaded by path (smoke test)

from trec_bench_data import data_paths, generate  # noqa: E402
from trec_bench_workers import (  # noqa: E402
    FULL_TOLERANCE,
    MEASURE_ARGS,
    WORKERS,
    rageval_argv,
)

# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    """The benchmarked rageval is the one in this checkout, installed or not."""
    env = dict(os.environ)
    root = str(HERE.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


# trec_eval's own binary, when --trec-eval names one.
TREC_EVAL_BINARY: list[Path] = []


def run_worker(side: str, qrels: Path, run: Path, output: Path) -> tuple[float, float, float]:
    """Run one worker in a fresh interpreter; return (wall seconds, peak RSS in MiB, CPU
    seconds: user and system time of all its threads).

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
    sink: Any = subprocess.DEVNULL
    if side == "trec_eval":  # the C program itself, its output written where the others write
        cmd = [str(TREC_EVAL_BINARY[0]), *rageval_argv(str(qrels), str(run))]
        sink = output.open("w")
    err_path = output.with_suffix(".stderr")
    with err_path.open("w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=err, env=_child_env())
        # wait4 gives this child's own resource usage (RUSAGE_CHILDREN would merge all of them).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if sink is not subprocess.DEVNULL:
        sink.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{side} worker failed with status {proc.returncode}:\n{err_path.read_text()[-3000:]}"
        )
    # Linux reports KiB. CPU time is what a busy machine distorts least: when other processes
    # hold the cores, wall time follows how many were left rather than the work done.
    return wall, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


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


def compile_bytecode() -> None:
    """The checkout's modules compiled to bytecode first, as an installed package has them: where
    bytecode is not written (PYTHONDONTWRITEBYTECODE), every timed rageval process would compile
    its modules from source again, which the parse floor (polars alone, installed) never does."""
    import compileall

    compileall.compile_dir(str(HERE.parent / "rageval"), quiet=1)


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
    parser.add_argument("--trec-eval", type=Path, metavar="BINARY",
                        help="also time trec_eval 10.0 itself (its output must be identical)")
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
    compile_bytecode()
    sides = list(SIDES)
    if args.with_ranx:
        if ranx_available():
            sides.append("ranx")
        else:
            print("ranx is not installed; skipping it")
    if args.trec_eval is not None:
        if not os.access(args.trec_eval, os.X_OK):
            parser.error(f"--trec-eval {args.trec_eval}: not an executable file")
        TREC_EVAL_BINARY.append(args.trec_eval.resolve())
        sides.append("trec_eval")
    print(
        f"measures: {' '.join(MEASURE_ARGS)}; {args.queries} topics x {args.docs} docs, "
        f"{args.repeats} repeat(s) per side, each in a fresh process "
        f"(python {platform.python_version()}, {os.cpu_count()} CPUs)"
    )

    times: dict[str, list[float]] = {s: [] for s in sides}
    peaks: dict[str, list[float]] = {s: [] for s in sides}
    cpus: dict[str, list[float]] = {s: [] for s in sides}
    with tempfile.TemporaryDirectory(prefix="bench-trec-") as tmp:
        outputs = {s: Path(tmp) / f"{s}.out" for s in sides}
        _, floor_mb, _ = run_worker("floor", qrels, run, Path(tmp) / "floor.out")
        print(f"  bare interpreter peak: {floor_mb:.1f} MB")
        for i in range(args.repeats):
            order = sides if i % 2 == 0 else sides[::-1]  # alternate to spread cache effects
            for side in order:
                wall, peak, cpu = run_worker(side, qrels, run, outputs[side])
                times[side].append(wall)
                peaks[side].append(peak)
                cpus[side].append(cpu)
                print(f"  run {i + 1}/{args.repeats} {side:<12} {wall:8.3f} s {peak:9.1f} MB "
                      f"{cpu:8.3f} s CPU")
        printed = compare_outputs(outputs["pytrec_eval"], outputs["rageval"])
        ranx_printed = (
            compare_outputs(outputs["pytrec_eval"], outputs["ranx"]) if "ranx" in sides else None
        )
        binary_identical = (outputs["trec_eval"].read_bytes() == outputs["rageval"].read_bytes()
                            if "trec_eval" in sides else None)
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
            "cpu_times_s": cpus[s],
            "median_cpu_s": statistics.median(cpus[s]),
        }
        for s in sides
    }
    print()
    print_table(results)
    ratio = results["pytrec_eval"]["median_s"] / results["rageval"]["median_s"]
    mem_ratio = results["pytrec_eval"]["peak_mb"] / results["rageval"]["peak_mb"]
    print(f"\npytrec_eval / rageval: {ratio:.2f}x wall time, {mem_ratio:.2f}x peak memory")
    over_floor = results["rageval"]["median_s"] / results["parse_floor"]["median_s"]
    cpu_over_floor = (results["rageval"]["median_cpu_s"]
                      / results["parse_floor"]["median_cpu_s"])
    print(f"rageval / parse floor (import polars, read the run's 3 columns): {over_floor:.2f}x "
          f"wall time (goal {FLOOR_GOAL}x, stretch {FLOOR_STRETCH}x), {cpu_over_floor:.2f}x CPU "
          f"time (medians {results['rageval']['median_cpu_s']:.3f} s and "
          f"{results['parse_floor']['median_cpu_s']:.3f} s)")
    if binary_identical is not None:
        te = results["trec_eval"]
        print(f"trec_eval / rageval: {te['median_s'] / results['rageval']['median_s']:.2f}x "
              f"wall time, {te['peak_mb'] / results['rageval']['peak_mb']:.2f}x peak memory; "
              f"output byte-identical: {binary_identical}")

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
    agree = printed["agree"] and full["agree"] and binary_identical is not False
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
        if binary_identical is False:
            print("trec_eval's output and rageval's differ", file=sys.stderr)
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
                    "ratio_time_rageval_over_parse_floor": over_floor,
                    "ratio_cpu_rageval_over_parse_floor": cpu_over_floor,
                    "printed_check": printed,
                    "full_check": full,
                    "ranx_printed_check": ranx_printed,
                    "trec_eval_identical": binary_identical,
                    "agree": agree,
                },
                indent=2,
                default=str,
            )
        )
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
