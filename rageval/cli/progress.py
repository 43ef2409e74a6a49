"""Progress on the terminal: transient bars on stderr while a run works (off when stderr is not
a terminal, unless asked for)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from rageval.orchestrator import ProgressHook

if TYPE_CHECKING:
    from rageval.judge.options import JudgeProgress


@dataclass
class Hooks:
    scoring: ProgressHook | None = None
    judge: Callable[[JudgeProgress], object] | None = None


@contextmanager
def progress_bars(enabled: bool) -> Iterator[Hooks]:
    """A scoring bar (records) and, once the judge starts, a judge bar (requests, failures,
    tokens) on stderr; transient, so the summary table is what stays on screen."""
    if not enabled:
        yield Hooks()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[extra]}"), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task("scoring", total=None, extra="")
        judge_task: list[TaskID] = []

        def scoring(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        def judge(progress: JudgeProgress) -> None:
            if not judge_task:
                judge_task.append(bar.add_task("judge", total=None, extra=""))
            extra = f"{progress.failed} failed · {progress.tokens:,} tokens"
            bar.update(judge_task[0], completed=progress.done, total=progress.total, extra=extra)

        yield Hooks(scoring, judge)
