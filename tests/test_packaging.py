"""The wheel holds every module of the package and the top-level ``prompts/`` (as
``rageval/prompts/``), and the judge finds the built-in prompts both from a source checkout and
from an installed wheel."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the source (so no build files land in the checkout)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("rageval", "prompts"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-c",
                    f"from setuptools import build_meta; build_meta.build_wheel({str(out)!r})"],
                   cwd=src, check=True, capture_output=True)
    (found,) = out.glob("rageval-*.whl")
    return found


def test_the_wheel_holds_every_module(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "rageval").rglob("*.py")}
    assert modules - names == set()


def test_the_wheel_holds_the_compiled_run_check(wheel: Path) -> None:
    """The optional C extension (a run's six-field proof) goes into the wheel wherever the
    install could build it (a C compiler and Python's headers); CI has both."""
    built_here = importlib.util.find_spec("rageval.retrieval.trec._six_fields") is not None
    if not built_here and os.environ.get("CI") != "true":
        pytest.skip("the C extension is not built here (no C compiler or Python headers): "
                    "the wheel goes without it")
    names = zipfile.ZipFile(wheel).namelist()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert f"rageval/retrieval/trec/_six_fields{suffix}" in names


def test_the_wheel_holds_the_top_level_prompts_and_page_assets(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    prompts = {"rageval/" + p.relative_to(ROOT).as_posix()
               for p in (ROOT / "prompts").rglob("*.toml")}
    assert prompts and prompts - names == set()
    assert {"rageval/report/assets/report.css", "rageval/report/assets/report.js"} <= names
    assert {f"rageval/annotate/assets/annotate.{ext}" for ext in ("html", "css", "js")} <= names


def test_an_installed_wheel_finds_its_prompts(wheel: Path, tmp_path: Path) -> None:
    """Unpacked away from the checkout (first on the path), the judge loads rubrics from the
    wheel's own copy."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    code = ("import rageval.judge.rubric.rubrics as p; r = p.load_rubric('faithfulness'); "
            "print(r.source); print(p.builtin_prompts()); "
            "from rageval.judge.pairwise.prompt import load_pairwise_prompt; "
            "print(load_pairwise_prompt(None).source)")
    shown = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True,
                           capture_output=True, text=True).stdout
    lines = shown.splitlines()
    assert len(lines) == 3 and all(line.startswith(str(tmp_path)) for line in lines)
    assert lines[2].endswith("pairwise.toml")


def test_a_source_checkout_finds_the_top_level_prompts() -> None:
    from rageval.judge.prompting.prompt_files import builtin_prompts

    assert Path(str(builtin_prompts())).resolve() == ROOT / "prompts"
    assert not (ROOT / "rageval" / "prompts").exists()
