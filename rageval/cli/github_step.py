"""GitHub Actions output of a scoring run (``--github``, ``--markdown FILE``): the summary
table appended to the job's summary page and written for a pull-request comment, and the
annotations printed as workflow commands (:mod:`rageval.gate.github`)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from rageval.core.errors import UsageError
from rageval.core.files import atomic_write
from rageval.gate.github import annotations, summary_markdown

if TYPE_CHECKING:
    from rich.console import Console

    from rageval.core.results import Results
    from rageval.gate.model import GateReport

__all__ = ["github_outputs"]


def github_outputs(results: Results, report: GateReport | None, name: str,
                   markdown: str | None, github: bool, console: Console) -> None:
    """``--markdown FILE``: the table, written whole; ``github``: the table appended to
    ``$GITHUB_STEP_SUMMARY`` (where the job has one) and the annotations on the run's output
    (stdout, where GitHub reads workflow commands)."""
    table = summary_markdown(results, report, name)
    if markdown:
        try:
            atomic_write(markdown, table)
        except OSError as error:
            raise UsageError(f"--markdown {markdown}: cannot write: "
                             f"{error.strerror or error}") from None
        console.print(f"wrote {markdown} (Markdown summary)", markup=False, highlight=False)
    if not github:
        return
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        try:
            with open(step_summary, "a", encoding="utf-8") as handle:
                handle.write(table + "\n")
        except OSError as error:  # the job's page lacks the table; the run's status stands
            print(f"rageval: warning: $GITHUB_STEP_SUMMARY {step_summary}: cannot append the "
                  f"summary table: {error.strerror or error}", file=sys.stderr)
    for command in annotations(results, report):  # one whole line each: never wrapped
        console.file.write(command + "\n")
