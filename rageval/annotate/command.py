"""``rageval annotate RUN_DIR --metric METRIC --labels FILE``: the run's metric, the walk and
the labels file put together, served until Ctrl-C or SIGTERM (exit 0).

The one line on stdout is the address to open, token included (flushed at once, so that a
script reading it can start); warnings go to stderr."""

from __future__ import annotations

import argparse
import getpass
import math
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import TextIO

from rageval.annotate.api import Api
from rageval.annotate.queue import AnnotatorQueue
from rageval.annotate.run import load_labelling_run
from rageval.annotate.server import AnnotateServer, is_loopback, make_server
from rageval.annotate.walk import DEFAULT_BUDGET, Walk
from rageval.core.errors import UsageError
from rageval.core.labels import LabelsFile

__all__ = ["annotate_command", "build_server", "default_annotator"]


def default_annotator() -> str:
    """The login name, the annotator's name unless ``--annotator`` says otherwise."""
    try:
        return getpass.getuser() or "annotator"
    except (KeyError, OSError):  # no name for this user id (a bare container)
        return "annotator"


def build_server(args: argparse.Namespace) -> AnnotateServer:
    """The server the options describe, bound and ready to serve (errors: exit 2)."""
    annotator = (args.annotator or default_annotator()).strip()
    if not annotator:
        raise UsageError("--annotator: must not be empty")
    budget = DEFAULT_BUDGET if args.budget is None else float(args.budget)
    if not (math.isfinite(budget) and budget > 0):
        raise UsageError(f"--budget: must be positive and finite, got {args.budget}")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port: must be in 0-65535, got {args.port}")
    run = load_labelling_run(args.run_dir, args.metric, args.records)
    walk = Walk.build(run, args.select, budget=budget, seed=args.seed)
    labels = LabelsFile(args.labels)  # errors (a directory, no folder) name the file
    queue = AnnotatorQueue(run, walk, labels, annotator, shown_judge=args.show_judge)
    if not is_loopback(args.host):
        print(f"rageval: warning: --host {args.host}: the page and the labels are open to "
              "whoever reaches this address and has the token; the traffic is not encrypted",
              file=sys.stderr)
    try:
        return make_server(Api(queue, show_judge=args.show_judge), args.host, args.port)
    except OSError as error:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: "
                         f"{error.strerror or error}") from None


def annotate_command(args: argparse.Namespace, out: TextIO) -> int:
    if args.plan is not None:
        from rageval.annotate.plan import plan_command

        return plan_command(args, out)
    server = build_server(args)
    with server, _stopped_by_sigterm():
        print(f"open {server.url}", file=out, flush=True)
        with suppress(KeyboardInterrupt):
            server.serve_forever()
    return 0


@contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM ends the server as Ctrl-C does (in the main thread only: elsewhere, as in a
    test that serves from a thread, the caller stops it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
