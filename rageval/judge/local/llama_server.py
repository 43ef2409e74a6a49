"""Building llama.cpp's own server, ``llama-server``, for this machine.

``rageval local-judge --engine llama-server`` serves the judge with the server most local-model
users run. It is not on PyPI as a program, but its source is: the llama.cpp tree vendored in
llama-cpp-python's source distribution. ``python -m rageval.judge.local.llama_server`` downloads
that distribution (the installed llama-cpp-python's version, else the newest), builds the
``llama-server`` target alone, statically linked, with the instruction sets of
:func:`~rageval.judge.local.build.cmake_args` (AMX off: see that module), and copies the one
executable to :func:`installed_path`, where ``rageval local-judge`` finds it. Several minutes on
two cores; nothing is done when it is there already (``--force`` builds again). Standard library
only, like :mod:`~rageval.judge.local.build`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from rageval.judge.local.build import cmake_args

__all__ = ["build", "installed_path"]

# Options of llama.cpp's build: no downloads at run time, no web UI to build, one executable.
_BUILD_OPTIONS = ("-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
                  "-DBUILD_SHARED_LIBS=OFF", "-DCMAKE_BUILD_TYPE=Release")


def installed_path() -> Path:
    """Where the built ``llama-server`` goes: beside this Python environment's own files."""
    return Path(sys.prefix) / "share" / "rageval" / "llama-server"


def _source(folder: Path) -> Path:
    """llama.cpp's source from llama-cpp-python's source distribution, unpacked in ``folder``."""
    try:
        wanted = f"llama-cpp-python=={metadata.version('llama-cpp-python')}"
    except metadata.PackageNotFoundError:
        wanted = "llama-cpp-python"
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                    ":all:", "--dest", str(folder), wanted], check=True)
    archive = next(folder.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return next(folder.glob("llama_cpp_python-*/vendor/llama.cpp"))


def build(destination: Path | None = None, jobs: int | None = None) -> Path:
    """Build ``llama-server`` and copy it to ``destination`` (default :func:`installed_path`)."""
    target = destination or installed_path()
    with tempfile.TemporaryDirectory(prefix="rageval-llama-server-") as tmp:
        source = _source(Path(tmp))
        out = Path(tmp) / "build"
        flags = [*_BUILD_OPTIONS, *cmake_args(), *os.environ.get("CMAKE_ARGS", "").split()]
        print(f"building llama-server with {' '.join(flags)} (several minutes on two cores)",
              flush=True)
        subprocess.run(["cmake", "-S", str(source), "-B", str(out), *flags], check=True)
        subprocess.run(["cmake", "--build", str(out), "--target", "llama-server", "-j",
                        str(jobs or os.cpu_count() or 1)], check=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copy2(out / "bin" / "llama-server", partial)
        os.replace(partial, target)  # never a half-copied executable under the name
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rageval.judge.local.llama_server",
        description="Build llama.cpp's llama-server for this machine (AMX off) from "
        "llama-cpp-python's source distribution, for rageval local-judge --engine llama-server.")
    parser.add_argument("--force", action="store_true", help="build again even if it is there")
    parser.add_argument("--jobs", type=int, default=None, help="parallel compile jobs")
    args = parser.parse_args(argv)
    target = installed_path()
    if target.is_file() and not args.force:
        print(f"llama-server is built already: {target}")
        return 0
    try:
        print(f"llama-server built: {build(target, args.jobs)}")
    except (subprocess.CalledProcessError, OSError, StopIteration) as exc:
        print(f"llama-server could not be built: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
