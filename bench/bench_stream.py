"""Streaming: peak RSS and wall time of ``rageval score`` as the number of records grows.

    python bench/bench_stream.py [--records 5000,20000,100000] [--repeats 3] [--seed 0]
        [--metrics ndcg@10 map ...] [--data-dir bench/data] [--engine local] [--json out.json]
        [--rss-curve] [--turns 5]

Each run is ``rageval score FILE -m ... --out TMP --no-progress`` in its own process (plus
``--engine ENGINE`` when one other than ``local`` is asked for); its wall time and peak RSS come
from ``os.wait4`` (``ru_maxrss``: the largest of the process and its reaped children, not their
sum), and so does its CPU time (user + system: on a busy machine a steadier measure of the work
than the wall time). Times and RSS are medians over ``--repeats``. A scorer that streams keeps
the RSS flat as the records grow and the time per record constant; one that holds every record
grows with them.

The records (5 contexts of ~40 words, answers ~30, references ~25 overlapping their answer) are
slices of a seeded stream of words drawn (Zipf-weighted) from a fixed vocabulary, so ROUGE and
BLEU are neither 0 nor 1. Each size is written once to ``--data-dir`` (git-ignored) as
``stream-<n>-seed<seed>.jsonl`` and reused. ``--turns N`` regroups the same records as
conversations of N turns (``stream-<n>-seed<seed>-turns<N>.jsonl``) and scores those too, so a
run of conversations is measured beside the same turns scored as records on their own.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bench_proc import rageval_command, run_usage

METRICS = ["ndcg@10", "map", "mrr", "p@5", "recall@5", "rouge1", "rouge2", "rougeL", "bleu"]
_VOCABULARY = """
the of and to in a is that for it as was with be by on not this are or from at which but have an
they you were there been one all we their has would when if so no will more about can its only
other new some what time these two may first then do any like now over such made after also did
many before must through back years where much way well down should because each just those how
company revenue growth market customer product service sales quarter annual report increase
decrease income operating cost price margin profit segment cloud software data model training
system user network security research result approach method analysis study policy government
public private health patient treatment clinical trial risk factor effect significant higher
lower rate level energy power water climate change environment emissions carbon production
supply demand chain global local regional national international investment investor fund
financial bank loan interest credit debt capital asset value share stock employee team
management strategy plan development technology platform device mobile online digital
advertising subscription license contract agreement partner acquisition legal regulatory
regulation compliance approval court law rule process quality standard performance efficient
improve reduce support provide include require requirement based main primary key major large
small additional several various different specific general total overall average nearly
percent billion million thousand according however therefore although while during within
across among retrieval passage document query answer reference context relevant ranking score
metric evaluation benchmark corpus index search engine language generation summary question
record batch memory stream file line token sentence word phrase claim source citation judge
"""
_WORDS = _VOCABULARY.split()
# (min, max) words of each text: query, answer, reference, then the 5 contexts.
_LENGTHS = [(6, 12), (20, 40), (18, 32)] + [(30, 50)] * 5
_CHUNK = 10_000


def _word_stream(rng: np.random.Generator, count: int) -> tuple[str, list[int]]:
    """``count`` Zipf-weighted words joined by spaces, and the offset where each word starts."""
    weights = 1.0 / np.arange(1, len(_WORDS) + 1) ** 0.9
    picks = rng.choice(len(_WORDS), size=count, p=weights / weights.sum())
    lengths = np.array([len(w) + 1 for w in _WORDS])[picks]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return " ".join(np.array(_WORDS, dtype=object)[picks].tolist()), starts.tolist()


def _chunk_lines(rng: np.random.Generator, first: int, count: int, text: str,
                 starts: list[int]) -> str:
    lows, highs = zip(*_LENGTHS, strict=True)
    sizes = rng.integers(lows, np.array(highs) + 1, size=(count, len(_LENGTHS))).tolist()
    offsets = rng.integers(0, len(starts) - 200, size=(count, len(_LENGTHS))).tolist()
    shifts = rng.integers(-15, 16, size=count).tolist()  # the reference starts near the answer
    grades = rng.integers(0, 4, size=(count, 5)).tolist()
    lines = []
    for k in range(count):
        i, size, off = first + k, sizes[k], offsets[k]
        off[2] = max(0, off[1] + shifts[k])
        texts = [text[starts[o]:starts[o + n] - 1] for o, n in zip(off, size, strict=True)]
        docs = [f"d{i}-{r}" for r in range(5)]
        lines.append(json.dumps({
            "id": f"q{i}", "query": texts[0] + "?",
            "contexts": [{"id": d, "text": t} for d, t in zip(docs, texts[3:], strict=True)],
            "answer": texts[1], "reference": texts[2],
            "judgments": dict(zip(docs, grades[k], strict=True)),
        }))
    return "\n".join(lines) + "\n"


def records_file(data_dir: Path, count: int, seed: int) -> Path:
    """The cached records file of ``count`` records, written first if it is missing."""
    path = data_dir / f"stream-{count}-seed{seed}.jsonl"
    if path.exists():
        return path
    data_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    text, starts = _word_stream(rng, 1 << 21)
    partial = path.with_suffix(".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for first in range(0, count, _CHUNK):
            handle.write(_chunk_lines(rng, first, min(_CHUNK, count - first), text, starts))
    partial.replace(path)
    print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB) "
          f"in {time.perf_counter() - start:.1f} s")
    return path


def conversations_file(data_dir: Path, count: int, seed: int, turns: int) -> Path:
    """The records of :func:`records_file` regrouped as conversations of ``turns`` turns (the
    same texts, in the same order: turn ``t`` of conversation ``c`` is record
    ``c * turns + t``), written first if it is missing."""
    path = data_dir / f"stream-{count}-seed{seed}-turns{turns}.jsonl"
    if path.exists():
        return path
    flat = records_file(data_dir, count, seed)
    partial = path.with_suffix(".partial")
    with flat.open(encoding="utf-8") as source, partial.open("w", encoding="utf-8") as out:
        group: list[dict[str, Any]] = []
        written = 0
        for line in source:
            record = json.loads(line)
            record.pop("id")
            group.append(record)
            if len(group) == turns:
                out.write(json.dumps({"id": f"c{written}", "turns": group}) + "\n")
                written, group = written + 1, []
        if group:
            out.write(json.dumps({"id": f"c{written}", "turns": group}) + "\n")
    partial.replace(path)
    return path


def run_once(path: Path, metrics: list[str], engine: str | None, source: str | None,
             extra: Sequence[str] = (), check: Callable[[Path], None] | None = None
             ) -> tuple[float, int, float]:
    """One ``rageval score`` process (``extra``: more of its options): (wall seconds, peak RSS
    in KiB, CPU seconds). ``check`` is given the run's output directory before it is
    removed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [*rageval_command(source), "score", str(path.resolve())]
        cmd += [a for m in metrics for a in ("-m", m)]
        cmd += [*extra, "--out", str(out), "--no-progress"]
        if engine and engine != "local":
            cmd += ["--engine", engine]
        wall, usage = run_usage(cmd, tmp)
        if check is not None:
            check(out)
        return wall, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def measure(path: Path, count: int, args: argparse.Namespace, *,
            metrics: list[str] | None = None, extra: Sequence[str] = (),
            check: Callable[[Path], None] | None = None) -> dict[str, Any]:
    """``args.repeats`` runs of ``args.metrics`` (or ``metrics``) on ``path``: their medians."""
    runs = [run_once(path, metrics or args.metrics, args.engine, args.source, extra, check)
            for _ in range(args.repeats)]
    wall = statistics.median(w for w, _, _ in runs)
    return {"records": count, "file": str(path), "bytes": path.stat().st_size,
            "runs": [{"wall_s": w, "peak_rss_kib": r, "cpu_s": c} for w, r, c in runs],
            "wall_s": wall, "rss_mib": statistics.median(r for _, r, _ in runs) / 1024,
            "cpu_s": statistics.median(c for _, _, c in runs),
            "us_per_record": wall / count * 1e6}


def print_shapes(flat: list[dict[str, Any]], grouped: list[dict[str, Any]],
                 turns: int) -> None:
    """The same turns scored as records on their own (the anchor) and as conversations."""
    header = (f"{'records':>10}{'conversations':>15}{'flat RSS MiB':>14}{'conv RSS MiB':>14}"
              f"{'flat wall s':>13}{'conv wall s':>13}{'RSS ratio':>11}{'wall ratio':>12}")
    print(header)
    print("-" * len(header))
    for a, b in zip(flat, grouped, strict=True):
        print(f"{a['records']:>10,}{-(-a['records'] // turns):>15,}{a['rss_mib']:>14.1f}"
              f"{b['rss_mib']:>14.1f}{a['wall_s']:>13.2f}{b['wall_s']:>13.2f}"
              f"{b['rss_mib'] / a['rss_mib']:>11.2f}{b['wall_s'] / a['wall_s']:>12.2f}")


def print_table(rows: list[dict[str, Any]], curve: bool) -> None:
    header = (f"{'records':>10}{'peak RSS MiB':>14}{'wall s':>10}{'us/record':>11}"
              f"{'RSS ratio':>11}{'CPU s':>10}{'CPU us/record':>15}")
    print(header)
    print("-" * len(header))
    base = rows[0]["rss_mib"]
    for row in rows:
        print(f"{row['records']:>10,}{row['rss_mib']:>14.1f}{row['wall_s']:>10.2f}"
              f"{row['us_per_record']:>11.1f}{row['rss_mib'] / base:>11.2f}"
              f"{row['cpu_s']:>10.2f}{row['cpu_s'] / row['records'] * 1e6:>15.1f}")
    if len(rows) > 1:
        big, prev = rows[-1], rows[-2]
        print(f"per record: {big['us_per_record']:.1f} us at {big['records']:,} records vs "
              f"{prev['us_per_record']:.1f} us at {prev['records']:,} "
              f"(x{big['us_per_record'] / prev['us_per_record']:.2f})")
    if curve:
        top = max(row["rss_mib"] for row in rows)
        for row in rows:
            bar = "#" * max(1, round(50 * row["rss_mib"] / top))
            print(f"{row['records']:>10,} {bar} {row['rss_mib']:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="5000,20000,100000",
                        help="comma-separated record counts (default 5000,20000,100000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics", nargs="+", default=METRICS, metavar="METRIC")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).parent / "data",
                        help="where the records files are cached (default bench/data)")
    parser.add_argument("--engine", help="passed on as --engine unless it is 'local'")
    parser.add_argument("--json", help="also write every number to this JSON file")
    parser.add_argument("--source", metavar="DIR",
                        help="run rageval from this source checkout (an earlier commit's "
                        "worktree, to measure before and after) instead of the installed one")
    parser.add_argument("--rss-curve", action="store_true", help="print peak RSS as bars")
    parser.add_argument("--turns", type=int, metavar="N",
                        help="also score the same records as conversations of N turns, and "
                        "print both shapes side by side (the records on their own the anchor)")
    args = parser.parse_args()
    sizes = sorted({int(n.replace("_", "")) for n in args.records.split(",") if n.strip()})
    paths = {n: records_file(args.data_dir, n, args.seed) for n in sizes}
    print(f"rageval score -m {' -m '.join(args.metrics)}, engine {args.engine or 'local'}, "
          f"median of {args.repeats}")
    rows = [measure(paths[n], n, args) for n in sizes]
    print_table(rows, args.rss_curve)
    grouped: list[dict[str, Any]] = []
    if args.turns:
        grouped = [measure(conversations_file(args.data_dir, n, args.seed, args.turns), n, args)
                   for n in sizes]
        print(f"\nthe same records as conversations of {args.turns} turns:")
        print_shapes(rows, grouped, args.turns)
    if args.json:
        result = {"metrics": args.metrics, "engine": args.engine or "local",
                  "repeats": args.repeats, "seed": args.seed, "rows": rows,
                  **({"turns": args.turns, "conversation_rows": grouped} if grouped else {})}
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
