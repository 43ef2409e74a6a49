"""The report's files: the records a run scored, read back for the per-record table, and the
finished page, written atomically."""

from __future__ import annotations

import os
from pathlib import Path

from rageval.core.files import atomic_write
from rageval.core.records import Record, load_records
from rageval.core.results import Results

__all__ = ["load_run_records", "write_report"]


def write_report(path: str | os.PathLike[str], html_text: str) -> Path:
    """Write the report to ``path`` through a temporary file and a rename, so that an
    interrupted run never leaves a half-written page where a good one was."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(target, html_text)


def load_run_records(results: Results) -> list[Record] | None:
    """The records a run scored, read again from the file its manifest names.

    Returns None when the run was scored from memory or the file is no longer there (the report
    then shows ids, scores and judge reasoning without queries and answers). A file that exists
    but no longer loads raises :class:`~rageval.core.errors.InputError`, naming the file and line.
    """
    source = results.records_info.source
    if source is None or source == "<memory>" or not Path(source).is_file():
        return None
    return load_records(source)
