"""docs/metrics.md is what scripts/make_metrics_doc.py writes from the metric registry, every
registered metric has an entry in the script's table (reference implementation and tests), and
every test the table names exists."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from rageval.core import registry
from rageval.core.metric import Batch, Metric, MetricResult

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "make_metrics_doc.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_metrics_doc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class ToyMetric(Metric):
    """A metric registered by a test, which the script's table does not know."""

    family = "retrieval"
    base = "toy_metric"
    summary = "a toy"

    def score(self, batch: Batch) -> MetricResult:
        return MetricResult({str(self.name): np.zeros(len(batch))}, [None] * len(batch))


def test_the_page_is_what_the_script_writes() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_a_stale_page_fails_the_check_with_a_diff(script: ModuleType, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "metrics.md"
    page.write_text(SCRIPT.parent.parent.joinpath("docs", "metrics.md").read_text(
        encoding="utf-8").replace("### `ndcg`", "### `ndcg (old)`"), encoding="utf-8")
    monkeypatch.setattr(script, "PAGE", page)
    assert script.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/metrics.md is stale" in err
    assert "-### `ndcg (old)`" in err and "+### `ndcg`" in err


def test_a_registered_metric_without_an_entry_is_named(script: ModuleType,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    registry.metric_classes()  # the built-in families first
    monkeypatch.setitem(registry._REGISTRY, "toy_metric", ToyMetric)
    assert script.main(["--check"]) == 1
    assert "metric 'toy_metric' has no entry in REFERENCES" in capsys.readouterr().err


def test_a_registered_namespace_without_an_entry_is_named(script: ModuleType,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    registry.metric_classes()

    def toy(name: Any, options: Any) -> Metric:
        return ToyMetric(options=options)

    monkeypatch.setitem(registry._NAMESPACES, "toy", toy)
    assert script.main(["--check"]) == 1
    assert "metric namespace 'toy:' has no entry" in capsys.readouterr().err


def test_a_named_test_that_does_not_exist_is_named(script: ModuleType,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    gone = "tests/retrieval/test_record_metrics_parity.py::test_no_such_test"
    monkeypatch.setitem(script.REFERENCES, "ndcg", dataclasses.replace(
        script.REFERENCES["ndcg"], parity=(gone,)))
    assert script.main(["--check"]) == 1
    assert f"metric 'ndcg': test {gone} does not exist" in capsys.readouterr().err


def test_every_named_test_exists_and_parity_tests_are_marked(script: ModuleType) -> None:
    for key, reference in script.REFERENCES.items():
        assert script.missing_tests(reference) == [], key
        for test in reference.parity:
            path, name = test.split("::")
            source = (ROOT / path).read_text(encoding="utf-8")
            module_marked = re.search(r"^pytestmark = .*parity", source, re.M)
            before = source[:source.index(f"def {name}(")].rsplit("\n\n\n", 1)[-1]
            assert module_marked or "pytest.mark.parity" in before, test


@pytest.mark.parametrize("metric", ["ndcg", "bleu", "claims:faithfulness",
                                    "judge:faithfulness"])
def test_a_newcomer_finds_the_code_and_the_tests_in_one_step(metric: str) -> None:
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text.split(f"### `{metric}`\n", 1)[1].split("\n### ", 1)[0]
    lines = {line.split("**")[1]: line for line in section.splitlines()
             if line.startswith("- **")}
    for key in ("Value computed in", "Signature built in", "Reference implementation"):
        assert key in lines, (metric, key)
    tests = lines.get("Parity tests", "") + lines.get("Other tests", "")
    assert "::test_" in tests, metric
    for line in (lines["Value computed in"], lines["Signature built in"], tests):
        for path in re.findall(r"`((?:rageval|tests)/[\w/]+\.py)(?:::\w+)?`", line):
            assert (ROOT / path).is_file(), (metric, path)
