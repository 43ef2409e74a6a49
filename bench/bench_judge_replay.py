"""A judge run replayed from its cache: peak RSS, wall and CPU time of ``rageval score
--offline`` as the number of records grows.

    python bench/bench_judge_replay.py [--records 100000,1000000,4000000] [--repeats 3]
        [--rubrics faithfulness correctness] [--metrics rouge1 ...] [--model M] [--seed 0]
        [--data-dir bench/data] [--source DIR] [--json out.json]

Each run is ``rageval score FILE -m judge:R ... --judge-model M --cache CACHE --offline --out
TMP --no-progress`` in its own process, timed as ``bench_stream.py`` times its runs (peak RSS
and CPU time from ``os.wait4``, medians over ``--repeats``); the records are
``bench_stream.py``'s files.
Every run's summary is checked: each judge metric scored every record, and the manifest
counts a cache hit for each request.

Filling a cache through a judge at millions of requests would take days, so each size's cache
is written directly, once, as ``judge-<n>-seed<seed>.sqlite`` in ``--data-dir`` (git-ignored),
and reused: for every record, each rubric metric's own requests (``units``: the messages it
renders and their cache keys, under the options ``rageval score`` gives it) get a well-formed
reply in the first wire format of the run's ladder (``json_schema``), with a grade derived
from the request's key (so the scores vary from record to record), usage tokens of about a
quarter of the prompt's characters, and the metadata a judge run stores beside a reply. The
request summary stored beside each reply leaves out the messages and the response format
(a replay reads only the endpoint from it): with them, 4,000,000 records' cache would take
over 30 GB instead of 5. The filler runs in a child process (with ``--source``, from that
checkout, so its keys are the measured rageval's) and leaves this process as light as
``bench_stream.py`` leaves its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

from bench_proc import source_first
from bench_stream import measure, print_table, records_file

if TYPE_CHECKING:  # imported where the cache is filled, in a child process
    from rageval.core.records.model import Record
    from rageval.judge.llm.cache.store import NewReply
    from rageval.judge.llm.options import JudgeOptions
    from rageval.judge.rubric.metric import JudgeMetric

RUBRICS = ["faithfulness", "correctness"]
MODEL = "gpt-4o-mini"
_WINDOW = 10_000  # records read and stored per transaction when a cache is filled


def judge_args(args: argparse.Namespace, cache: Path) -> list[str]:
    """What the measured command adds to ``rageval score FILE -m ...``."""
    return ["--judge-model", args.model, "--cache", str(cache.resolve()), "--offline"]


def metric_names(args: argparse.Namespace) -> list[str]:
    return [f"judge:{r}" for r in args.rubrics] + list(args.metrics)


def cache_file(records: Path, count: int, args: argparse.Namespace) -> Path:
    """The cache of every judge request of ``records``, filled first if it is missing."""
    path = args.data_dir / f"judge-{count}-seed{args.seed}.sqlite"
    if path.exists():
        return path
    start = time.perf_counter()
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, "--fill", str(records), str(partial), "--model",
           args.model, "--rubrics", *args.rubrics, "--fill-jobs", str(args.fill_jobs),
           *(["--source", args.source] if args.source else [])]
    # Each child fills every fill_jobs-th window of records (rendering them is the work; the
    # cache takes one writer at a time, and waits for the other).
    children = [subprocess.Popen([*cmd, "--fill-part", str(k)]) for k in range(args.fill_jobs)]
    if any(child.wait() != 0 for child in children):
        sys.exit(f"bench: filling {partial} failed")
    partial.replace(path)
    print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB) "
          f"in {time.perf_counter() - start:.1f} s")
    return path


def fill(records: Path, cache_path: Path, model: str, rubrics: list[str], part: int = 0,
         parts: int = 1) -> None:
    """Store a reply for every request the rubric metrics make of the records of every
    ``parts``-th window of ``records``, from window ``part`` on (in a child process: see the
    module's docstring)."""
    from rageval.core.metric import ScoreOptions
    from rageval.core.records import iter_windows
    from rageval.core.registry import create
    from rageval.judge.llm.cache.store import JudgeCache
    from rageval.judge.llm.options import JudgeOptions

    # As `rageval score --judge-model M --cache C --offline` configures the judge.
    judge = JudgeOptions(model=model, cache=str(cache_path.resolve()), offline=True)
    judge.check()
    options = ScoreOptions(judge=judge)
    metrics = [cast("JudgeMetric", create(f"judge:{r}", options)) for r in rubrics]
    fmt = judge.ladder[0]
    with JudgeCache(cache_path) as cache:
        for w, window in enumerate(iter_windows(str(records), _WINDOW)):
            if w % parts != part:
                continue
            cache.put_many(reply for i, record in enumerate(window) for metric in metrics
                           for reply in _replies(metric, judge, fmt, record, i))


def _replies(metric: JudgeMetric, judge: JudgeOptions, fmt: str, record: Record,
             index: int) -> list[NewReply]:
    """The cache entries of one record's requests of one rubric metric."""
    low, high = (int(v) for v in metric.score_range())
    out: list[NewReply] = []
    for unit in metric.units(record, index):
        key = unit.keys[fmt]
        grade = low + int(key[:8], 16) % (high - low + 1)
        reply = json.dumps({"reasoning": "The answer's claims were compared with the texts "
                            "it is graded against, and the grade follows the rubric's anchors.",
                            "score": grade})
        prompt = sum(len(m["content"]) for m in unit.messages) // 4
        completion = len(reply) // 4
        usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                 "total_tokens": prompt + completion}
        request = {"model": judge.model, "endpoint": judge.endpoint,
                   "params": judge.params(unit.sample), "sample_index": unit.sample}
        meta = {**metric.reply_meta(unit), "record": record.id, "format": fmt,
                "finish_reason": "stop", "served_model": judge.model}
        out.append((key, request, reply, usage, meta))
    return out


def check_run(out: Path, count: int, args: argparse.Namespace) -> None:
    """Every judge metric scored every record, each request a cache hit."""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    for rubric in args.rubrics:
        figures = summary["metrics"][f"judge:{rubric}"]
        if figures["n"] != count or figures["unscored"]:
            sys.exit(f"bench: judge:{rubric} scored {figures['n']} of {count} records "
                     f"({figures['unscored']} unscored)")
    hits = summary["manifest"]["judge"]["cache"]["hits"]
    if hits != count * len(args.rubrics):
        sys.exit(f"bench: {hits} cache hits for {count * len(args.rubrics)} requests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="100000,1000000,4000000",
                        help="comma-separated record counts (default 100000,1000000,4000000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="of bench_stream's records")
    parser.add_argument("--rubrics", nargs="+", default=RUBRICS, metavar="RUBRIC")
    parser.add_argument("--metrics", nargs="+", default=[], metavar="METRIC",
                        help="other metrics to score beside the judge, as a run of both "
                        "kinds would (default: none)")
    parser.add_argument("--model", default=MODEL, help="the judge model the cache is keyed on")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).parent / "data",
                        help="where the records and caches are kept (default bench/data)")
    parser.add_argument("--source", metavar="DIR",
                        help="run rageval from this source checkout instead of the installed "
                        "one (the caches are filled from it too)")
    parser.add_argument("--json", help="also write every number to this JSON file")
    parser.add_argument("--fill-jobs", type=int, default=2,
                        help="processes filling a missing cache (default 2)")
    parser.add_argument("--fill", nargs=2, metavar=("RECORDS", "CACHE"), help=argparse.SUPPRESS)
    parser.add_argument("--fill-part", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        if args.source:
            source_first(args.source)
        fill(Path(args.fill[0]), Path(args.fill[1]), args.model, args.rubrics, args.fill_part,
             args.fill_jobs)
        return
    args.engine = None  # what measure() passes on: the local engine
    sizes = sorted({int(n.replace("_", "")) for n in args.records.split(",") if n.strip()})
    names = metric_names(args)
    rows = []
    print(f"rageval score -m {' -m '.join(names)} --offline (replayed from the judge cache), "
          f"median of {args.repeats}")
    for n in sizes:
        path = records_file(args.data_dir, n, args.seed)
        cache = cache_file(path, n, args)
        rows.append(measure(path, n, args, metrics=names, extra=judge_args(args, cache),
                            check=lambda out, n=n: check_run(out, n, args)))
    print_table(rows, curve=False)
    if args.json:
        result = {"metrics": names, "model": args.model, "repeats": args.repeats,
                  "seed": args.seed, "rows": rows}
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
