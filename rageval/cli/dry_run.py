"""``rageval score --dry-run`` (and ``rageval run --dry-run``): what a run would ask its judge,
counted and priced, with nothing sent and nothing written, and what would stop the real run
before its first reply (no API key, an endpoint that cannot be reached: exit status 2)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO

from rich.table import Table
from rich.text import Text

from rageval.api import evaluate
from rageval.compare.command_output import console_for
from rageval.core.manifest import judge_sections
from rageval.core.names import parse
from rageval.core.outputs.text import terminal

if TYPE_CHECKING:
    from rich.console import Console

    from rageval.core.results import Results
    from rageval.inputs import InputSpec
    from rageval.judge.llm.options import JudgeOptions

__all__ = ["DRY_RUN_STOPPED", "print_dry_run", "run_dry"]

#: The exit status of a dry run that found what would stop the real run (as that run would).
DRY_RUN_STOPPED = 2

# The metric namespaces whose values come from the judge.
_ASKING = ("judge", "claims", "nuggets", "citations")
# What the requests of a manifest section of judge work are called in the table.
_KINDS = {"judge": "judge", "judge_panel": "panel member", "claims": "claim step"}


def run_dry(args: argparse.Namespace, inputs: InputSpec, judge: JudgeOptions | None,
            out: TextIO) -> int:
    """The judge metrics scored with a judge that sends nothing (the other metrics are left
    out: they ask nothing), and the table of what a run would ask; no run directory and no
    cache entry is written."""
    console = console_for(out)
    asking = [m for m in args.metrics if parse(m).namespace in _ASKING]
    if judge is None or (not asking and args.judgments_from is None):
        console.print("a dry run counts the requests to the judge, and this run has none: "
                      "nothing would be sent", markup=False, highlight=False)
        return 0
    results = evaluate(
        inputs, asking or args.metrics, qrels=args.qrels, bootstrap=1,
        batch_size=args.batch_size, embedding_cache=args.embedding_cache,
        judge=replace(judge, dry_run=True), judgments_from=args.judgments_from,
        format=args.format, max_line_bytes=args.max_line_bytes, window=args.window,
    )
    problems = print_dry_run(results, console)
    if args.out:
        console.print(terminal(f"nothing was written to {args.out}: a dry run writes nothing"),
                      markup=False, highlight=False)
    return DRY_RUN_STOPPED if problems else 0


def print_dry_run(results: Results, console: Console) -> list[str]:
    """The table of a dry run: per rubric or claim step, the requests to send, the cache hits,
    the estimated tokens and cost, and their total; then how the tokens were counted, and what
    would stop the real run (returned)."""
    table = Table(title=f"dry run over {len(results.records)} records: nothing was sent",
                  title_justify="left")
    for label in ("requests of", "to send", "cache hits", "prompt tokens",
                  "completion tokens", "cost (USD)"):
        table.add_column(label, justify="left" if label == "requests of" else "right")
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    problems: list[str] = []
    for section, part in judge_sections(results.manifest).items():
        kind = _KINDS.get(section, section)
        for name, planned in (part.get("dry_run") or {}).items():
            table.add_row(*(Text(terminal(cell)) for cell in (f"{name} ({kind})",
                                                               *_cells(planned))))
            rows.append(planned)
            notes.append(f"{name}: completion tokens: {planned['completion_estimate']}")
        if part.get("prompt_tokens_counted_by"):
            notes.insert(0, f"{section}: prompt tokens counted by "
                            f"{part['prompt_tokens_counted_by']}")
        problems += [p for p in part.get("would_stop") or () if p not in problems]
        if part.get("batch_plan"):
            plan = part["batch_plan"]
            notes.append(f"{section}: by batch: {plan['requests']:,} requests in "
                         f"{plan['batches']:,} batch(es) (about {plan['input_bytes_estimate']:,} "
                         f"bytes), the cost at {plan['discount']:.0%} of the prices")
    table.add_row(*(Text(cell) for cell in ("total", *_total(rows))), style="bold")
    console.print(table)
    if results.manifest.get("claims"):
        notes.append("claim-level steps after the first are asked about the replies to the "
                     "steps before them: they are counted only where those replies are cached")
    # Notes and problems may quote an endpoint's words: made safe for a terminal and a CI log.
    for line in notes:
        console.print(terminal(line), markup=False, highlight=False)
    for problem in problems:
        console.print(terminal(f"the real run would stop: {problem}"), markup=False,
                      highlight=False)
    return problems


def _total(rows: list[dict[str, Any]]) -> list[str]:
    """The cells of the rows added up. Completion tokens some row does not know make the sum
    a lower bound, shown with a + (``unknown`` when no row knows them), as does a cost that
    counts some row's prompt only; the cost is blank only without prices."""
    known = [row["completion_tokens"] for row in rows if row["completion_tokens"] is not None]
    some_unknown = len(known) < len(rows)
    costs = [row["cost_usd"] for row in rows if row["cost_usd"] is not None]
    more = "+" if some_unknown else ""
    completion = "unknown" if rows and not known else f"{sum(known):,}{more}"
    return [str(sum(row["requests"] for row in rows)),
            str(sum(row["cache_hits"] for row in rows)),
            f"{sum(row['prompt_tokens'] for row in rows):,}", completion,
            f"{sum(costs):.4f}{more}" if costs else "—"]


def _cells(planned: dict[str, Any]) -> list[str]:
    completion = planned["completion_tokens"]
    cost = planned["cost_usd"]
    return [str(planned["requests"]), str(planned["cache_hits"]),
            f"{planned['prompt_tokens']:,}",
            "unknown" if completion is None else f"{completion:,}",
            "—" if cost is None else f"{cost:.4f}" + ("" if completion is not None else "+")]
