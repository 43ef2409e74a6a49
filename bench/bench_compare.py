"""Comparing runs: peak RSS and wall time of ``rageval compare`` as the runs grow.

    python bench/bench_compare.py [--records 100000,1000000] [--repeats 3] [--draws 1000]
        [--template 2000] [--data-dir bench/data] [--json out.json] [--build-only]

Two systems are scored for real on ``--template`` records of ``bench_stream``'s data (seed 0
and seed 1: the same ids, other texts) with ``bench_stream.METRICS``; each size's run
directories are then those records repeated under fresh ids (``q7~3``: record q7, copy 3)
until the run has the size asked. A run's ``summary.json`` is its template's with the
records' count and the digest of the file written: a comparison reads only each output's
signature and aggregate from it, and every value from the records. The directories are
written once to ``--data-dir`` (git-ignored) as ``compare-<n>-t<template>-<a|b>`` and reused.

Each size is compared in its own process, ``rageval compare A B --resamples D --permutations
D``, twice where both apply: with the exact paired bootstrap (``--ci records``, sizes up to
100,000 records, where it is the default) and streamed from disk with running sums
(``--ci poisson``, the default past 100,000). Wall time and peak RSS come from ``os.wait4``;
medians over ``--repeats``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench_proc import rageval_command, run_process
from bench_stream import METRICS, records_file

_EXACT_LIMIT = 100_000


def template_run(data_dir: Path, size: int, seed: int, source: str | None) -> Path:
    """The scored run of the ``size`` records of ``seed``, scored once and reused."""
    out = data_dir / f"compare-t{size}-seed{seed}"
    if (out / "summary.json").exists():
        return out
    records = records_file(data_dir, size, seed)
    cmd = [*rageval_command(source), "score", str(records.resolve()), "--out", str(out),
           "--no-progress", "--bootstrap", "50"]
    subprocess.run(cmd + [a for m in METRICS for a in ("-m", m)], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def sized_run(data_dir: Path, template: Path, count: int, side: str) -> Path:
    """``template``'s records repeated under fresh ids to ``count`` records."""
    size = template.name.split("-")[1]
    out = data_dir / f"compare-{count}-{size}-{side}"
    if (out / "summary.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    lines = (template / "records.jsonl").read_text(encoding="utf-8").splitlines()
    # Each line starts {"id": "<id>", ...: the copy's id is spliced in after it.
    heads = [line.index('"', 8) for line in lines]
    digest = hashlib.sha256()
    with (out / "records.jsonl").open("wb") as handle:
        for start in range(0, count, len(lines)):
            copy = start // len(lines)
            block = "".join(f"{line[:head]}~{copy}{line[head:]}\n"
                            for line, head in zip(lines[: count - start], heads, strict=False))
            data = block.encode("utf-8")
            digest.update(data)
            handle.write(data)
    summary = json.loads((template / "summary.json").read_text(encoding="utf-8"))
    summary["records_sha256"] = digest.hexdigest()
    summary["manifest"]["records"]["count"] = count
    (out / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return out


def compare_once(a: Path, b: Path, method: str, draws: int,
                 source: str | None) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [*rageval_command(source), "compare", str(a), str(b), "--resamples", str(draws),
               "--permutations", str(draws), "--ci", method, "--json",
               str(Path(tmp) / "compare.json")]
        return run_process(cmd, tmp)


def measure(count: int, a: Path, b: Path, method: str,
            args: argparse.Namespace) -> dict[str, Any]:
    runs = [compare_once(a, b, method, args.draws, args.source) for _ in range(args.repeats)]
    wall = statistics.median(w for w, _ in runs)
    return {"records": count, "method": method, "draws": args.draws,
            "runs": [{"wall_s": w, "peak_rss_kib": r} for w, r in runs], "wall_s": wall,
            "rss_mib": statistics.median(r for _, r in runs) / 1024,
            "us_per_record": wall / count * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100000,1000000",
                        help="comma-separated run sizes (default 100000,1000000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--draws", type=int, default=1000,
                        help="bootstrap resamples and relabellings (default 1000)")
    parser.add_argument("--template", type=int, default=2000,
                        help="records scored for real, then repeated (default 2000)")
    parser.add_argument("--data-dir", default=str(Path(__file__).parent / "data"))
    parser.add_argument("--json", help="also write the measurements here")
    parser.add_argument("--build-only", action="store_true",
                        help="write the run directories and stop")
    parser.add_argument("--source", help="rageval's source tree to run (default: installed)")
    args = parser.parse_args()
    data_dir = Path(args.data_dir)
    templates = [template_run(data_dir, args.template, seed, args.source) for seed in (0, 1)]
    sizes = [int(n) for n in args.records.split(",")]
    runs = {n: [sized_run(data_dir, t, n, side) for t, side in zip(templates, "ab",
                                                                    strict=True)]
            for n in sizes}
    if args.build_only:
        return
    rows = []
    print(f"{'records':>10} {'method':>8} {'wall s':>9} {'peak MiB':>9} {'us/record':>10}")
    for count in sizes:
        for method in ("records", "poisson") if count <= _EXACT_LIMIT else ("poisson",):
            row = measure(count, *runs[count], method, args)
            rows.append(row)
            print(f"{count:>10,} {method:>8} {row['wall_s']:>9.2f} {row['rss_mib']:>9.1f} "
                  f"{row['us_per_record']:>10.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
