"""A judge run replayed from its cache: peak RSS, wall and CPU time of ``rageval score
--offline`` as the number of records grows, and the CPU time per judgment (a record's request
of one rubric), the whole process's (its start included).

    python bench/bench_judge_replay.py [--records 100000,1000000,4000000] [--repeats 3]
        [--rubrics faithfulness correctness] [--metrics rouge1 ...] [--model M] [--seed 0]
        [--data-dir bench/data] [--source DIR] [--base REV|DIR] [--json out.json]

With ``--base``, the same runs of an earlier version (a git revision, checked out in a
temporary worktree removed after; or a checkout's directory) are measured beside them, each
side replaying a cache filled by its own code, and the table shows both and their ratio:

    python bench/bench_judge_replay.py --records 8000 --source . --base 6f0676e

Each run is ``rageval score FILE -m judge:R ... --judge-model M --cache CACHE --offline --out
TMP --no-progress`` in its own process, timed as ``bench_stream.py`` times its runs (peak RSS
and CPU time from ``os.wait4``, medians over ``--repeats``); the records are
``bench_stream.py``'s files.
Every run's summary is checked: each judge metric scored every record, and the manifest
counts a cache hit for each request.

Filling a cache through a judge at millions of requests would take days, so each size's cache
is written directly, once per side, as ``judge-<n>-seed<seed>.sqlite`` in ``--data-dir`` (git-
ignored; ``judge-<n>-seed<seed>-base.sqlite`` for ``--base``), and reused while the side's
requests have the same keys (the keys of the first record's requests, written beside the cache,
are checked before each size is measured): for every record, each rubric metric's own requests
(``units``: the messages it renders and their cache keys, under the options ``rageval score``
gives it) get a well-formed reply in the first wire format of the run's ladder
(``json_schema``), with a grade derived from the request's key (so the scores vary from record
to record), usage tokens of about a quarter of the prompt's characters, the metadata a judge
run stores beside a reply, and the request's id where the side's cache stores one. The request
summary stored beside each reply leaves out the messages and the response format (a replay
reads only the endpoint from it): with them, 4,000,000 records' cache would take over 30 GB
instead of 5. The filler runs in a child process (with ``--source``, from that checkout, so its
keys are the measured rageval's) and leaves this process as light as ``bench_stream.py`` leaves
its own. """

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

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


def cache_file(records: Path, count: int, args: argparse.Namespace, side: str) -> Path:
    """The cache of every judge request of ``records`` as the rageval of ``side`` (``this``:
    ``args.source``; ``base``: ``args.base_dir``) makes them, filled first if it is missing or
    its requests' keys are not this rageval's."""
    suffix = "-base" if side == "base" else ""
    path = args.data_dir / f"judge-{count}-seed{args.seed}{suffix}.sqlite"
    source = args.source if side == "this" else args.base_dir
    common = [sys.executable, __file__, "--model", args.model, "--rubrics", *args.rubrics,
              *(["--source", source] if source else [])]
    keys_file = path.with_suffix(".keys")
    if path.exists() and keys_file.exists():
        keys = subprocess.run([*common, "--keys", str(records)], check=True,
                              capture_output=True, text=True).stdout
        if keys == keys_file.read_text(encoding="utf-8"):
            return path
    start = time.perf_counter()
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    cmd = [*common, "--fill", str(records), str(partial), "--fill-jobs", str(args.fill_jobs)]
    # Each child fills every fill_jobs-th window of records (rendering them is the work; the
    # cache takes one writer at a time, and waits for the other).
    children = [subprocess.Popen([*cmd, "--fill-part", str(k)]) for k in range(args.fill_jobs)]
    if any(child.wait() != 0 for child in children):
        sys.exit(f"bench: filling {partial} failed")
    partial.replace(path)
    keys_file.write_text(subprocess.run([*common, "--keys", str(records)], check=True,
                                        capture_output=True, text=True).stdout,
                         encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB) "
          f"in {time.perf_counter() - start:.1f} s")
    return path


def _metrics(model: str, cache_path: Path, rubrics: list[str]
             ) -> tuple[JudgeOptions, list[JudgeMetric]]:
    """The judge options and rubric metrics ``rageval score --judge-model M --cache C
    --offline`` makes (in a child process: see the module's docstring)."""
    from rageval.core.metric import ScoreOptions
    from rageval.core.registry import create
    from rageval.judge.llm.options import JudgeOptions

    judge = JudgeOptions(model=model, cache=str(cache_path.resolve()), offline=True)
    judge.check()
    options = ScoreOptions(judge=judge)
    return judge, [cast("JudgeMetric", create(f"judge:{r}", options)) for r in rubrics]


def first_keys(records: Path, model: str, rubrics: list[str]) -> str:
    """The cache keys of the first record's requests, one line each (what tells whether a
    filled cache holds this rageval's requests)."""
    from rageval.core.records import iter_windows

    _, metrics = _metrics(model, Path("unused.sqlite"), rubrics)
    record = next(iter_windows(str(records), 1))[0]
    return "".join(f"{key}\n" for metric in metrics for unit in metric.units(record)
                   for key in unit.keys.values())


def fill(records: Path, cache_path: Path, model: str, rubrics: list[str], part: int = 0,
         parts: int = 1) -> None:
    """Store a reply for every request the rubric metrics make of the records of every
    ``parts``-th window of ``records``, from window ``part`` on (in a child process: see the
    module's docstring)."""
    from rageval.core.records import iter_windows
    from rageval.judge.llm.cache.store import JudgeCache

    judge, metrics = _metrics(model, cache_path, rubrics)
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
        # The request's id, where this rageval stores one beside each reply.
        request_id = getattr(unit, "request_id", None)
        out.append((key, request, reply, usage, meta, *([request_id] if request_id else [])))
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


@contextmanager
def base_checkout(base: str | None) -> Iterator[str | None]:
    """The directory of the ``--base`` side: a checkout's directory as it is, a git revision
    checked out in a temporary worktree (removed after)."""
    if base is None or Path(base).is_dir():
        yield base
        return
    where = Path(tempfile.mkdtemp(prefix="rageval-base-")) / "checkout"
    root = Path(__file__).resolve().parent.parent
    subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(where), base],
                   check=True, capture_output=True)
    try:
        yield str(where)
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(where)],
                       check=False, capture_output=True)


def measure_side(path: Path, n: int, args: argparse.Namespace, side: str) -> dict[str, Any]:
    """``args.repeats`` replays of ``n`` records by the rageval of ``side``: medians, and the
    CPU microseconds per judgment."""
    cache = cache_file(path, n, args, side)
    run_args = argparse.Namespace(**vars(args))
    run_args.source = args.source if side == "this" else args.base_dir
    row = measure(path, n, run_args, metrics=metric_names(args),
                  extra=judge_args(args, cache),
                  check=lambda out, n=n: check_run(out, n, args))
    judgments = n * len(args.rubrics)
    row.update(side=side, judgments=judgments,
               cpu_us_per_judgment=row["cpu_s"] / judgments * 1e6,
               cpu_s_runs=[r["cpu_s"] for r in row["runs"]])
    return row


def print_sides(rows: list[dict[str, Any]], bases: list[dict[str, Any]]) -> None:
    """Each size's CPU per judgment, wall and peak RSS, this rageval beside the base."""
    header = (f"{'records':>10}{'judgments':>11}{'side':>6}{'CPU s':>9}{'CPU us/judgment':>17}"
              f"{'wall s':>9}{'peak RSS MiB':>14}")
    print(header)
    print("-" * len(header))
    for row, base in zip(rows, bases, strict=True):
        for r in (base, row):
            print(f"{r['records']:>10,}{r['judgments']:>11,}{r['side']:>6}{r['cpu_s']:>9.2f}"
                  f"{r['cpu_us_per_judgment']:>17.1f}{r['wall_s']:>9.2f}{r['rss_mib']:>14.1f}")
        print(f"{'':>10}{'':>11}{'ratio':>6}{'':>9}"
              f"{base['cpu_us_per_judgment'] / row['cpu_us_per_judgment']:>16.2f}x"
              f"{base['wall_s'] / row['wall_s']:>8.2f}x"
              f"{base['rss_mib'] / row['rss_mib']:>13.2f}x")


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
    parser.add_argument("--base", metavar="REV|DIR",
                        help="also measure this earlier version (a git revision or a "
                        "checkout's directory) and print both, with the ratio")
    parser.add_argument("--json", help="also write every number to this JSON file")
    parser.add_argument("--fill-jobs", type=int, default=2,
                        help="processes filling a missing cache (default 2)")
    parser.add_argument("--fill", nargs=2, metavar=("RECORDS", "CACHE"), help=argparse.SUPPRESS)
    parser.add_argument("--fill-part", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--keys", metavar="RECORDS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill or args.keys:
        if args.source:
            source_first(args.source)
        if args.keys:
            sys.stdout.write(first_keys(Path(args.keys), args.model, args.rubrics))
            return
        fill(Path(args.fill[0]), Path(args.fill[1]), args.model, args.rubrics, args.fill_part,
             args.fill_jobs)
        return
    args.engine = None  # what measure() passes on: the local engine
    sizes = sorted({int(n.replace("_", "")) for n in args.records.split(",") if n.strip()})
    names = metric_names(args)
    print(f"rageval score -m {' -m '.join(names)} --offline (replayed from the judge cache), "
          f"median of {args.repeats}")
    with base_checkout(args.base) as base_dir:
        args.base_dir = base_dir
        rows, bases = [], []
        for n in sizes:
            path = records_file(args.data_dir, n, args.seed)
            if args.base_dir is not None:
                bases.append(measure_side(path, n, args, "base"))
            rows.append(measure_side(path, n, args, "this"))
    if bases:
        print_sides(rows, bases)
    else:
        print_table(rows, curve=False)
        for row in rows:
            print(f"CPU per judgment at {row['records']:,} records: "
                  f"{row['cpu_us_per_judgment']:.1f} us")
    if args.json:
        result = {"metrics": names, "model": args.model, "repeats": args.repeats,
                  "seed": args.seed, "base": args.base, "rows": rows, "base_rows": bases}
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
