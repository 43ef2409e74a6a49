"""GitHub Actions output of a scoring run (``--github``, ``--markdown FILE``): the summary
table appended to the job's summary page and written for a pull-request comment, and the
annotations printed as workflow commands (:mod:`rageval.gate.github`), each a whole line that
rageval writes itself: untrusted text never starts a line of the run's output
(:func:`rageval.core.outputs.text.terminal`), so no guard around it is needed and these
commands are always read."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from rageval.core.errors import UsageError
from rageval.core.files import atomic_write
from rageval.core.outputs.masking import NO_SECRETS
from rageval.core.outputs.text import terminal, terminal_lines
from rageval.gate.github import annotations, summary_markdown

if TYPE_CHECKING:
    from rich.console import Console

    from rageval.core.outputs.masking import Masker
    from rageval.core.results import Results
    from rageval.gate.model import GateReport

__all__ = ["github_outputs"]


def github_outputs(results: Results, report: GateReport | None, name: str,
                   markdown: str | None, github: bool, console: Console,
                   masker: Masker = NO_SECRETS) -> None:
    """``--markdown FILE``: the table, written whole; ``github``: the table appended to
    ``$GITHUB_STEP_SUMMARY`` (where the job has one) and the annotations on the run's output
    (stdout, where GitHub reads workflow commands)."""
    table = summary_markdown(results, report, name, masker)
    if markdown:
        try:
            atomic_write(markdown, table)
        except OSError as error:
            raise UsageError(f"--markdown {markdown}: cannot write: "
                             f"{error.strerror or error}") from None
        console.print(terminal(f"wrote {markdown} (Markdown summary)"), markup=False,
                      highlight=False)
    if not github:
        return
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        try:
            with open(step_summary, "a", encoding="utf-8") as handle:
                handle.write(table + "\n")
        except OSError as error:  # the job's page lacks the table; the run's status stands
            warning = (f"rageval: warning: $GITHUB_STEP_SUMMARY {step_summary}: cannot append "
                       f"the summary table: {error.strerror or error}")
            print(terminal_lines(masker(warning)), file=sys.stderr)
    for command in annotations(results, report, masker):  # one whole line each: never wrapped
        console.file.write(command + "\n")
