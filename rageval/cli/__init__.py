"""The ``rageval`` command: argument parsing and dispatch in :mod:`~rageval.cli.parser`, the
subcommands' work in :mod:`~rageval.cli.commands`. ``rageval trec-eval`` reads trec_eval's own
command line (:mod:`~rageval.cli.trec_eval_command`): it is dispatched here, before the parser
and the modules it loads are imported."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Run ``rageval`` with ``argv`` (default: the process's arguments); return the exit
    status (see :func:`rageval.cli.parser.main`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["trec-eval"]:
        _load_numpy_without_blas_threads()
        from rageval.cli import trec_eval_command

        try:
            return trec_eval_command.main(args[1:], stdout=stdout)
        except BrokenPipeError:  # `rageval trec-eval ... | head` closes the pipe early
            return 0
    from rageval.cli.parser import main as run_command

    return run_command(args, stdout)


def _load_numpy_without_blas_threads() -> None:
    """trec-eval multiplies no matrices: numpy's BLAS need not start its pool of threads, which
    costs a short run tens of milliseconds. Only where numpy is not loaded yet (a process that
    runs the command first) and the setting is not the user's; the variable is put back, so
    nothing this process starts later sees it. Done here, not when the command's module is
    imported, so that importing it leaves a process's BLAS as it was."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]
