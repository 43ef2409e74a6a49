"""Building llama-cpp-python (the local judge's engine) for the machine it runs on.

llama-cpp-python compiles llama.cpp from source, by default with ``-march=native``: every
instruction set the CPU's ``cpuid`` lists. A CPU can list instructions its operating system
does not let a program use as it stands. AMX is the case met in practice: a virtual machine or a
container lists ``amx_tile amx_int8`` but the process is not granted the tile state, so the
server dies with SIGILL (``tileloadd``) on its first completion. pip's wheel cache then hands
the same broken wheel back on every reinstall, whatever ``CMAKE_ARGS`` says.

This module names every x86-64 instruction-set option of llama.cpp explicitly: on where the
kernel reports the feature as usable (the flags of ``/proc/cpuinfo``, which Linux clears when
the OS does not enable a feature's register state), off otherwise, and AMX always off. llama.cpp's
runtime dispatch between CPU variants (``GGML_CPU_ALL_VARIANTS``) is not used: it chooses by
``cpuid`` bits alone, so it would pick the AMX variant on the very machines that refuse it, and
it compiles a dozen variants (hours on two cores). On ARM and other architectures llama.cpp's own
detection is kept (Linux reports those features only when the kernel enables them).

Run ``python -m rageval.judge.local.build`` to see the flags and whether the installed build
suits this machine; ``--install`` builds and installs it (without pip's cache) when it does not;
``--force`` rebuilds whatever is installed. The module uses the standard library only, so it
runs from a fresh clone before anything else is installed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

__all__ = ["REQUIREMENT", "BuildCheck", "check_installed", "cmake_args", "cpu_flags",
           "rebuild_command"]

# The pip requirement of the `local` extra (tests/judge/local/test_local_build.py checks that
# pyproject agrees).
REQUIREMENT = "llama-cpp-python[server]>=0.3.7"
_DISTRIBUTION = "llama-cpp-python"

# llama.cpp option -> the /proc/cpuinfo flags that must all be present to turn it on.
X86_OPTIONS: dict[str, tuple[str, ...]] = {
    "GGML_SSE42": ("sse4_2",),
    "GGML_AVX": ("avx",),
    "GGML_AVX2": ("avx2",),
    "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",),
    "GGML_BMI2": ("bmi2",),
    "GGML_AVX_VNNI": ("avx_vnni",),
    # -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw, as llama.cpp compiles it
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "GGML_AVX512_VBMI": ("avx512f", "avx512_vbmi"),
    "GGML_AVX512_VNNI": ("avx512f", "avx512_vnni"),
    "GGML_AVX512_BF16": ("avx512f", "avx512_bf16"),
}
# Never on: the tile state is granted per process by the kernel, which VMs and containers may
# refuse while cpuid still lists the feature.
AMX_OPTIONS = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
# How llama.cpp names a compiled-in feature in its system info -> the cpuinfo flags it needs.
_SYSTEM_INFO_NEEDS: dict[str, tuple[str, ...]] = {
    "AVX": ("avx",), "AVX2": ("avx2",), "FMA": ("fma",), "F16C": ("f16c",), "BMI2": ("bmi2",),
    "AVX_VNNI": ("avx_vnni",), "AVX512": ("avx512f",), "AVX512_VBMI": ("avx512_vbmi",),
    "AVX512_VNNI": ("avx512_vnni",), "AVX512_BF16": ("avx512_bf16",),
}
_AMX_INFO = ("AMX_INT8", "AMX_TILE", "AMX_BF16")


def is_x86(machine: str | None = None) -> bool:
    return (machine or platform.machine()).lower() in ("x86_64", "amd64", "i686", "i386")


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str] | None:
    """The CPU feature flags the kernel reports as usable (``/proc/cpuinfo``), or None where
    they cannot be read (not Linux)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return None


def cmake_args(machine: str | None = None, flags: frozenset[str] | None = None) -> list[str]:
    """The ``CMAKE_ARGS`` for llama.cpp on this machine (see the module's docstring)."""
    if not is_x86(machine):
        return []
    if flags is None:
        flags = cpu_flags()
    if flags is None:  # not Linux: llama.cpp's own detection (no VM listing AMX seen there)
        return []
    args = ["-DGGML_NATIVE=OFF"]
    for option, needs in X86_OPTIONS.items():
        on = flags is not None and all(f in flags for f in needs)
        args.append(f"-D{option}={'ON' if on else 'OFF'}")
    args += [f"-D{option}=OFF" for option in AMX_OPTIONS]
    return args


@dataclass(frozen=True)
class BuildCheck:
    """What is installed, and whether it suits this machine."""

    version: str | None  # None: llama-cpp-python is not installed
    features: frozenset[str]  # what the installed build was compiled with
    refused: tuple[str, ...]  # compiled-in features this machine does not let it use

    @property
    def suits(self) -> bool:
        return self.version is not None and not self.refused

    def describe(self) -> str:
        if self.version is None:
            return "llama-cpp-python is not installed"
        if any(r.startswith("cannot load it") for r in self.refused):
            return f"llama-cpp-python {self.version} {self.refused[0]}"
        built = " ".join(sorted(self.features)) or "no optional instruction sets"
        if not self.refused:
            return f"llama-cpp-python {self.version} suits this machine (built with {built})"
        return (f"llama-cpp-python {self.version} was built for instructions this machine "
                f"refuses ({', '.join(self.refused)}): it would die with SIGILL")


def system_info_features(info: str) -> frozenset[str]:
    """The features llama.cpp's system info line reports as compiled in (``AVX2 = 1``)."""
    return frozenset(name for name, value in re.findall(r"([A-Z0-9_]+) = (\d+)", info)
                     if value != "0")


def refused_features(features: frozenset[str], flags: frozenset[str] | None,
                     machine: str | None = None) -> tuple[str, ...]:
    """The compiled-in features a build may not use here: AMX always (see AMX_OPTIONS), the
    others where the kernel does not list what they need."""
    if not is_x86(machine):
        return ()
    refused = [name for name in _AMX_INFO if name in features]
    if flags is not None:
        refused += [name for name, needs in _SYSTEM_INFO_NEEDS.items()
                    if name in features and not all(f in flags for f in needs)]
    return tuple(refused)


def check_installed() -> BuildCheck:
    """Whether the installed llama-cpp-python suits this machine. Its system info is read in a
    child process: loading the library runs no instruction of the refused kinds, but keeps this
    process free of it."""
    try:
        version = metadata.version(_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return BuildCheck(None, frozenset(), ())
    probe = ("import llama_cpp; print(llama_cpp.llama_print_system_info().decode("
             "'utf-8', 'replace'))")
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              timeout=120, check=False)
    except subprocess.TimeoutExpired:
        return BuildCheck(version, frozenset(), ("cannot load it: no answer within 120 s",))
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return BuildCheck(version, frozenset(), (f"cannot load it: {why}",))
    features = system_info_features(done.stdout)
    return BuildCheck(version, features, refused_features(features, cpu_flags()))


def rebuild_command() -> str:
    """The command that rebuilds llama-cpp-python for this machine."""
    return "python -m rageval.judge.local.build --install --force"


def install(force: bool = False) -> int:
    """Build and install llama-cpp-python for this machine (no pip cache: a cached wheel
    ignores CMAKE_ARGS). Returns pip's exit status."""
    env = dict(os.environ)
    # The user's own CMAKE_ARGS (a GPU backend, BLAS) come last, so that they win.
    args = [*cmake_args(), *env.get("CMAKE_ARGS", "").split()]
    if args:
        env["CMAKE_ARGS"] = " ".join(args)
    # Built from source, never a wheel from an index (it would ignore CMAKE_ARGS).
    pip = [sys.executable, "-m", "pip", "install", "--no-binary", _DISTRIBUTION]
    print(f"building llama-cpp-python with CMAKE_ARGS={env.get('CMAKE_ARGS', '')!r} "
          "(several minutes on two cores)", flush=True)
    if force:
        # Only llama-cpp-python is rebuilt; its dependencies are installed by the second step.
        status = subprocess.call([*pip, "--no-cache-dir", "--force-reinstall", "--no-deps",
                                  REQUIREMENT.replace("[server]", "")], env=env)
        if status != 0:
            return status
    return subprocess.call([*pip, "--no-cache-dir", REQUIREMENT], env=env)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rageval.judge.local.build",
        description="Build llama-cpp-python (the local judge's engine) for this machine: "
        "explicit instruction sets, AMX off, no pip cache.")
    parser.add_argument("--install", action="store_true",
                        help="build and install it unless the installed one suits this machine")
    parser.add_argument("--force", action="store_true",
                        help="with --install: rebuild even if the installed one suits it")
    parser.add_argument("--cmake-args", action="store_true",
                        help="print only the CMAKE_ARGS for this machine")
    args = parser.parse_args(argv)
    if args.cmake_args:
        print(" ".join(cmake_args()))
        return 0
    check = check_installed()
    print(check.describe(), flush=True)
    if not args.install:
        print(f"CMAKE_ARGS for this machine: {' '.join(cmake_args()) or '(none needed)'}")
        return 0 if check.suits else 1
    if check.suits and not args.force:
        return 0
    status = install(force=args.force or check.version is not None)
    if status != 0:
        return status
    after = check_installed()
    print(after.describe(), flush=True)
    return 0 if after.suits else 1


if __name__ == "__main__":
    sys.exit(main())
