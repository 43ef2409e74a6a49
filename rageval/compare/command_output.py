"""Output shared by ``rageval compare`` and ``rageval agree``: the console they print to, and
the ``--json`` file they write."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console

from rageval.core.errors import UsageError
from rageval.core.files import atomic_write

__all__ = ["console_for", "write_json_file"]


def console_for(out: TextIO) -> Console:
    """As `rageval score`: a file or pipe gets a wide, plain table; a terminal its own width."""
    is_tty = hasattr(out, "isatty") and out.isatty()
    return Console(file=out, width=None if is_tty else 160, no_color=not is_tty,
                   highlight=False)


def write_json_file(data: Any, path: str | os.PathLike[str]) -> None:
    """Write ``data`` as indented JSON (no NaN) to ``--json`` ``path``; a crash never leaves a
    torn file, and a path that cannot be written is a :class:`UsageError`."""
    text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    try:
        atomic_write(Path(path), text + "\n")
    except OSError as err:
        raise UsageError(f"--json {path}: cannot write: {err}") from None
