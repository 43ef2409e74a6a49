"""Building llama-cpp-python for the machine: every x86-64 instruction set named, on only where
the kernel reports it usable, AMX always off; an installed build judged against the machine;
and the requirement the same as the ``local`` extra's."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from rageval.judge.local import build as local_build
from rageval.judge.local.build import (
    REQUIREMENT,
    cmake_args,
    cpu_flags,
    refused_features,
    system_info_features,
)

ROOT = Path(__file__).resolve().parents[3]
# /proc/cpuinfo of a VM that lists AMX and AVX-512 (the kernel reports what it enables).
HASWELL = frozenset({"fpu", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"})
SAPPHIRE = HASWELL | {"avx_vnni", "avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw",
                      "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"}


def _options(args: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("-D").split("=") for a in args)


def test_amx_is_off_even_where_the_cpu_lists_it() -> None:
    opts = _options(cmake_args("x86_64", SAPPHIRE))
    assert opts["GGML_NATIVE"] == "OFF"
    assert {opts[o] for o in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")} == {"OFF"}
    assert opts["GGML_AVX2"] == opts["GGML_AVX512"] == opts["GGML_AVX512_VNNI"] == "ON"
    assert opts["GGML_AVX512_VBMI"] == "OFF"  # not listed


def test_every_instruction_set_is_named_so_nothing_falls_to_a_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp turns AVX2 and friends on by default when native is off: a machine without
    them must have them named off."""
    old = _options(cmake_args("x86_64", frozenset({"fpu", "sse4_2"})))
    assert old["GGML_SSE42"] == "ON"
    assert all(old[o] == "OFF" for o in ("GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C",
                                         "GGML_BMI2", "GGML_AVX512"))
    haswell = _options(cmake_args("AMD64", HASWELL))
    assert haswell["GGML_AVX2"] == haswell["GGML_FMA"] == "ON"
    assert haswell["GGML_AVX512"] == "OFF"
    # Flags that cannot be read (not Linux): llama.cpp's own detection.
    monkeypatch.setattr(local_build, "cpu_flags", lambda: None)
    assert cmake_args("x86_64") == []


def test_other_architectures_keep_llama_cpps_own_detection() -> None:
    assert cmake_args("aarch64", SAPPHIRE) == [] and cmake_args("arm64", None) == []


def test_cpuinfo_flags_are_read_from_the_flags_line() -> None:
    text = "processor\t: 0\nflags\t\t: fpu avx2 amx_tile\nbugs\t\t: spectre\n"
    assert cpu_flags(text) == frozenset({"fpu", "avx2", "amx_tile"})
    assert cpu_flags("processor : 0\n") is None


def test_an_installed_build_is_judged_by_what_it_was_compiled_with() -> None:
    info = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
            "AVX512 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | "
            "REPACK = 0 | ")
    features = system_info_features(info)
    assert "AMX_INT8" in features and "REPACK" not in features
    assert refused_features(features, SAPPHIRE, "x86_64") == ("AMX_INT8",)
    assert refused_features(features, HASWELL, "x86_64") == ("AMX_INT8", "AVX512",
                                                             "AVX512_VNNI")
    portable = system_info_features("CPU : AVX = 1 | AVX2 = 1 | FMA = 1 | F16C = 1 | ")
    assert refused_features(portable, HASWELL, "x86_64") == ()
    assert refused_features(features, None, "aarch64") == ()


def test_the_requirement_is_the_local_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert REQUIREMENT in project["project"]["optional-dependencies"]["local"]


def test_the_command_reports_and_builds_only_when_needed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[list[str]] = []
    envs: list[dict[str, str]] = []
    monkeypatch.setattr(local_build.subprocess, "call",
                        lambda argv, env: calls.append(argv) or envs.append(env) or 0)
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_CUDA=ON")
    fine = local_build.BuildCheck("0.3.36", frozenset({"AVX2"}), ())
    broken = local_build.BuildCheck("0.3.36", frozenset({"AMX_INT8"}), ("AMX_INT8",))
    monkeypatch.setattr(local_build, "check_installed", lambda: fine)
    assert local_build.main(["--install"]) == 0 and calls == []
    assert "suits this machine" in capsys.readouterr().out
    checks = iter([broken, fine])
    monkeypatch.setattr(local_build, "check_installed", lambda: next(checks))
    assert local_build.main(["--install"]) == 0
    assert "would die with SIGILL" in capsys.readouterr().out
    # The broken build is replaced without pip's cache, then its dependencies installed.
    # Always from source: never a wheel from an index, which would ignore CMAKE_ARGS.
    source = ["install", "--no-binary", "llama-cpp-python", "--no-cache-dir"]
    assert [c[c.index("install"):] for c in calls] == [
        [*source, "--force-reinstall", "--no-deps", REQUIREMENT.replace("[server]", "")],
        [*source, REQUIREMENT]]
    assert all(c[:3] == [sys.executable, "-m", "pip"] for c in calls)
    # The user's own CMAKE_ARGS are kept, last, so that they win.
    assert all(e["CMAKE_ARGS"].endswith("-DGGML_CUDA=ON") for e in envs)


def test_it_runs_from_a_fresh_clone_with_the_standard_library_only() -> None:
    """The README's test command runs it before anything is installed."""
    import subprocess

    code = ("import sys; sys.modules['numpy'] = None; sys.modules['polars'] = None; "
            "sys.modules['openai'] = None; import runpy; sys.argv = ['x', '--cmake-args']; "
            "runpy.run_module('rageval.judge.local.build', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    if local_build.is_x86():
        assert "-DGGML_AMX_INT8=OFF" in done.stdout
