"""The ``rageval`` command: argument parsing and dispatch in :mod:`~rageval.cli.parser`, the
subcommands' work in :mod:`~rageval.cli.commands`."""

from rageval.cli.parser import main

__all__ = ["main"]
