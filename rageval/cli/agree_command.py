"""``rageval agree``: how far judges agree with each other or with people, printed, and
written to ``--json`` atomically when asked."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TextIO

from rageval.compare.agree.agreement import agree_runs
from rageval.compare.agree.output import render_agreement
from rageval.compare.command_output import console_for, write_json_file
from rageval.core.errors import UsageError
from rageval.core.outputs.text import terminal

__all__ = ["agree_command", "parse_pair", "run_agree"]


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
) -> int:
    """``rageval agree``: compute, print to ``out``, write JSON (atomically) when asked."""
    parsed = [p if isinstance(p, tuple) else parse_pair(p) for p in pairs or ()]
    report = agree_runs(dir_a, dir_b, human=human, records_path=records_path,
                        metric_pairs=parsed or None, intersect=intersect, metric=metric)
    console = console_for(out)
    render_agreement(report, console)
    if json_path is not None:
        write_json_file(report.to_json(), json_path)
        console.print(terminal(f"wrote {json_path}"), markup=False, highlight=False)
    return 0


def agree_command(args: argparse.Namespace, out: TextIO) -> int:
    """``rageval agree`` from its parsed arguments (the parser's handler)."""
    return run_agree(args.run_a, args.run_b, args.human, args.records, args.pair,
                     args.intersect, args.json, out, metric=args.metric)
