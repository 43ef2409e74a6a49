"""Implementations of the CLI subcommands (argument parsing lives in :mod:`rageval.cli`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from rageval.errors import UsageError
from rageval.orchestrator import ProgressHook, evaluate
from rageval.records import load_records
from rageval.report import metrics_table, print_summary


def _console(out: TextIO) -> Console:
    # A file or pipe gets a wide, plain table; a terminal gets its own width and colour.
    is_tty = hasattr(out, "isatty") and out.isatty()
    return Console(file=out, width=None if is_tty else 160, no_color=not is_tty,
                   highlight=False)


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[ProgressHook | None]:
    if not enabled:
        yield None
        return
    columns = (TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task("scoring", total=None)

        def hook(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield hook


def _prepare_out_dir(path: str) -> None:
    """Make sure results can be written before spending time scoring."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {path}: cannot create the output directory: {err}") from None
    if not os.access(path, os.W_OK):
        raise UsageError(f"--out {path}: the output directory is not writable")


def run_score(args: argparse.Namespace, out: TextIO) -> int:
    if args.out:
        _prepare_out_dir(args.out)
    records = load_records(args.records, format=args.format)
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    with _progress_bar(bool(show) and len(records) > 0) as hook:
        results = evaluate(
            records,
            args.metrics,
            qrels=args.qrels,
            trec_convention=args.trec_convention,
            seed=args.seed,
            bootstrap=args.bootstrap,
            batch_size=args.batch_size,
            progress=hook,
            embedding_cache=args.embedding_cache,
        )
    results.manifest["records"]["source"] = args.records
    console = _console(out)
    print_summary(results, console, components=args.components)
    if args.out:
        written = results.write(args.out)
        console.print(f"wrote {written / 'records.jsonl'} and {written / 'summary.json'}")
    return 0


def run_metrics(out: TextIO) -> int:
    _console(out).print(metrics_table())
    return 0


def run_fuse(args: argparse.Namespace, out: TextIO) -> int:
    from rageval.fusion import reciprocal_rank_fusion
    from rageval.trec import read_run, write_run

    if len(args.runs) < 2:
        raise UsageError("fuse needs at least two runs")
    if args.depth is not None and args.depth < 1:
        raise UsageError(f"--depth must be at least 1, got {args.depth}")
    fused = reciprocal_rank_fusion(
        [read_run(path).frame for path in args.runs], k=args.k, depth=args.depth,
        runid=args.runid, names=args.runs,
    )
    write_run(out, fused, runid=args.runid)
    return 0
