"""What the benchmarks share: the command that runs rageval in a fresh process (this checkout's
installed copy, or another checkout's source), and timing such a process. Kept free of heavy
imports: a child's peak RSS as the kernel reports it includes what the parent held when it
started the child."""

from __future__ import annotations

import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

# Runs rageval from a source checkout given as argv[1] (an earlier commit's worktree, say),
# ahead of the installed copy (see source_first).
_FROM_SOURCE = (
    f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
    "from bench_proc import source_first; source_first(sys.argv.pop(1)); "
    "from rageval.cli import main; sys.exit(main(sys.argv[1:]))"
)


def source_first(source: str) -> None:
    """Make this process import rageval from the checkout ``source`` rather than the installed
    copy: an editable install's import hook would otherwise win over ``sys.path``."""
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, str(Path(source).resolve()))


def rageval_command(source: str | None = None) -> list[str]:
    if source is not None:
        return [sys.executable, "-c", _FROM_SOURCE, str(Path(source).resolve())]
    if importlib.util.find_spec("rageval.__main__") is not None:
        return [sys.executable, "-m", "rageval"]
    script = shutil.which("rageval", path=str(Path(sys.executable).parent)) or shutil.which(
        "rageval")
    if script is None:
        sys.exit("bench: neither `python -m rageval` nor a `rageval` script is available")
    return [script]


def run_process(cmd: list[str], cwd: str) -> tuple[float, int]:
    """Run ``cmd`` in ``cwd`` to completion: (wall seconds, peak RSS in KiB, from
    ``os.wait4``). A failure prints the child's stderr and ends the benchmark."""
    wall, usage = run_usage(cmd, cwd)
    return wall, usage.ru_maxrss


def run_usage(cmd: list[str], cwd: str) -> tuple[float, resource.struct_rusage]:
    """:func:`run_process`, with everything ``os.wait4`` reports of the child (its CPU time
    too: on a busy machine a steadier measure of the work than the wall time)."""
    with open(Path(cwd) / "stderr", "w+b") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            sys.stderr.write(err.read().decode(errors="replace"))
            sys.exit(f"bench: `{' '.join(cmd)}` exited with {code}")
    return wall, usage
