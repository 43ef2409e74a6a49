"""``rageval compare``: compare the runs, print the tables, write ``--json`` atomically."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from rageval.compare.command_output import console_for
from rageval.compare.runs.compare import compare_runs
from rageval.compare.runs.output import render_comparison, write_json
from rageval.core.outputs.text import terminal

__all__ = ["run_compare"]


def run_compare(
    dirs: Sequence[str],
    baseline: str | None,
    json_path: str | None,
    intersect: bool,
    resamples: int,
    permutations: int,
    seed: int,
    components: bool,
    out: TextIO,
    human: str | None = None,
    ci: str = "records",
) -> int:
    """The ``rageval compare`` command: compare, write ``--json`` atomically, print tables."""
    comparison = compare_runs(dirs, baseline=baseline, intersect=intersect,
                              resamples=resamples, permutations=permutations, seed=seed,
                              human=human, ci=ci)
    console = console_for(out)
    render_comparison(comparison, console, components=components)
    if json_path:
        write_json(comparison, json_path)
        console.print(terminal(f"wrote {json_path}"), markup=False, highlight=False)
    return 0
