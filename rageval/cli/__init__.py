"""The ``rageval`` command: argument parsing and dispatch in :mod:`~rageval.cli.parser`, the
subcommands' work in :mod:`~rageval.cli.commands`. ``rageval trec-eval`` reads trec_eval's own
command line (:mod:`~rageval.cli.trec_eval_command`): it is dispatched here, before the parser
and the modules it loads are imported."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Run ``rageval`` with ``argv`` (default: the process's arguments); return the exit
    status (see :func:`rageval.cli.parser.main`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["trec-eval"]:
        from rageval.cli import trec_eval_command

        try:
            return trec_eval_command.main(args[1:], stdout=stdout)
        except BrokenPipeError:  # `rageval trec-eval ... | head` closes the pipe early
            return 0
    from rageval.cli.parser import main as run_command

    return run_command(args, stdout)
