"""Progress on the terminal: transient bars on stderr while a run works (off when stderr is not
a terminal, unless asked for), one bar per long step, and :func:`final_line`, the account of
the run printed once the bars are gone."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rageval.core.outputs.text import terminal
from rageval.core.results import count_of
from rageval.core.results.counts import RunCounts
from rageval.orchestrator import ProgressHook

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from rageval.core.progress import LoadProgress, StepProgress
    from rageval.core.results import Results
    from rageval.judge.llm.options import JudgeProgress


@dataclass
class Hooks:
    """The callbacks a run reports to (all None when progress is not shown)."""

    scoring: ProgressHook | None = None
    judge: Callable[[JudgeProgress], object] | None = None
    loading: LoadProgress | None = None
    steps: StepProgress | None = None


class _Bars:
    """The bars of one run, each added the first time its step reports, in that order."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.tasks: dict[str, TaskID] = {}
        self.accounts: dict[int, JudgeProgress] = {}

    def show(self, name: str, done: int, total: int | None, count: str, extra: str = "") -> None:
        if name not in self.tasks:
            self.tasks[name] = self.bar.add_task(name, total=None, count="", extra="")
        # extra may quote an endpoint (a pending batch's id and status): made safe for the
        # terminal, and drawn without rich's markup (see progress_bars).
        self.bar.update(self.tasks[name], completed=done, total=total, count=count,
                        extra=terminal(extra))

    def loading(self, done: int, total: int | None) -> None:
        # Bytes, characters or rows, depending on the file format: a share says it for all.
        count = f"{done:,}" if not total else f"{100 * done // total}%"
        self.show("loading", done, total, count)
        if done == total:  # read: scoring starts (its first count comes after a batch)
            self.show("scoring", 0, None, "")

    def scoring(self, done: int, total: int | None) -> None:
        # A records file scored window by window: the total is the file's, on the loading bar.
        count = count_of(done, "record") if total is None else f"{done:,}/{total:,} records"
        self.show("scoring", done, total, count)

    def step(self, step: str, done: int, total: int | None, info: str) -> None:
        count = f"{done:,}" if total is None else f"{done:,}/{total:,}"
        self.show(step, done, total, count, info)

    def judge(self, progress: JudgeProgress) -> None:
        # Each account's counts are its own so far: the run's are the sum of the latest.
        self.accounts[progress.account] = progress
        latest = self.accounts.values()
        done, total, hits = (sum(p.done for p in latest), sum(p.total for p in latest),
                             sum(p.hits for p in latest))
        replayed = sum(p.cached_tokens for p in latest)
        parts = [f"{hits:,} cache hits", f"{sum(p.failed for p in latest):,} failed",
                 f"{sum(p.tokens for p in latest):,} tokens"
                 + (f" ({replayed:,} replayed)" if replayed else "")]
        parts.extend(_provider_tokens(sum(p.cached_prompt_tokens for p in latest),
                                      sum(p.reasoning_tokens for p in latest),
                                      sum(p.prompt_tokens for p in latest)))
        costs = [p.cost_usd for p in latest if p.cost_usd is not None]
        if costs:
            parts.append(f"${sum(costs):,.4f}")
        parts += [p.note for p in latest if p.note]  # a pending batch: status, counts, time
        # The bar fills with every reply in hand (cached or received): a replay fills it too.
        self.show("judge", done + hits, total + hits, f"{done:,}/{total:,} requests",
                  " · ".join(parts))


@contextmanager
def progress_bars(enabled: bool) -> Iterator[Hooks]:
    """Bars on stderr for reading the records, scoring (records), each long step inside the
    metrics (BERTScore's embedding) and the judge (requests, cache hits, failures, tokens,
    spend); transient, so the summary table is what stays on screen."""
    if not enabled:
        yield Hooks()
        return
    from rich.console import Console  # only for bars: a run without them never loads them
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.fields[count]}", markup=False),
               TextColumn("{task.fields[extra]}", markup=False), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        bars = _Bars(bar)
        yield Hooks(bars.scoring, bars.judge, bars.loading, bars.step)


def final_line(results: Results) -> str:
    """One line that accounts for a run, from its manifest: records, metrics, wall time and,
    when the judge worked, its requests, cache hits, failures, tokens (with those the endpoint
    read from its prompt cache, and reasoning tokens, where it reports them) and spend, e.g.
    ``8 records · 21 metrics · 4.7 s · judge: 0 requests, 40 cache hits, 28,177 tokens
    replayed``."""
    manifest = results.manifest
    metrics = len(manifest.get("metrics", []))
    parts = [RunCounts.of(results).text(), count_of(metrics, "metric")]
    if manifest.get("wall_time_s") is not None:
        parts.append(f"{float(manifest['wall_time_s']):.1f} s")
    judge = _judge_account(manifest)
    if judge:
        parts.append(f"judge: {judge}")
    return " · ".join(parts)


def _judge_account(manifest: Mapping[str, Any]) -> str:
    """The judge work of every manifest section that accounts for some (the rubric judge's
    ``judge``, claim-level judging's ``claims``), added up; "" when there is none."""
    sections = [s for s in manifest.values()
                if isinstance(s, Mapping) and "requests" in s and isinstance(s.get("cache"),
                                                                              Mapping)]
    if not sections:
        return ""

    def total(read: Callable[[Mapping[str, Any]], Any]) -> int:
        return sum(int(read(s) or 0) for s in sections)

    requests = total(lambda s: s["requests"])
    parts = [count_of(requests, "request"), count_of(total(lambda s: s["cache"].get("hits")),
                                                 "cache hit")]
    failed = total(lambda s: s.get("failed"))
    if failed:
        parts.append(f"{failed:,} failed")
    tokens = total(lambda s: (s.get("usage") or {}).get("total_tokens"))
    if tokens:
        parts.append(f"{tokens:,} tokens")
    replayed = total(lambda s: (s.get("cached_usage") or {}).get("total_tokens"))
    if replayed:
        parts.append(f"{replayed:,} tokens replayed")
    prompt = total(lambda s: (s.get("usage") or {}).get("prompt_tokens"))
    cached = total(lambda s: (s.get("usage") or {}).get("cached_prompt_tokens"))
    parts.extend(_provider_tokens(cached, total(
        lambda s: (s.get("usage") or {}).get("reasoning_tokens")), prompt))
    costs = [s["cost_usd"].get("this_run") for s in sections if s.get("cost_usd")]
    if costs:
        parts.append(f"${sum(c or 0.0 for c in costs):,.4f} spent")
    batched = [s["batch"] for s in sections if (s.get("batch") or {}).get("replies")]
    if batched:
        parts.append(f"{sum(b['replies'] for b in batched):,} by batch at "
                     f"{batched[0]['discount']:.0%} of the prices")
    return ", ".join(parts)


def _provider_tokens(cached: int, reasoning: int, prompt: int = 0) -> list[str]:
    """What the endpoint reported of its own prompt cache (prompt tokens it read from it, and
    their share of ``prompt`` when known) and of reasoning tokens; nothing it did not report."""
    parts = []
    if cached:
        share = f" ({100 * cached / prompt:.0f}% of prompt tokens)" if prompt else ""
        parts.append(f"{cached:,} tokens from the prompt cache{share}")
    if reasoning:
        parts.append(f"{reasoning:,} reasoning")
    return parts
