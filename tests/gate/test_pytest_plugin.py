"""The pytest plugin: the ``rag_evaluate`` fixture, ``--rageval-out``, and
``assert_rag_quality``'s messages, run inside real pytest sessions (``pytester``)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from rageval.core.errors import UsageError
from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.pytest_plugin import assert_rag_quality, run_dir_name

pytest_plugins = ["pytester"]

# Block the entry-point registration ("rageval", once pyproject declares it) and load the
# module by name, so the inner sessions load the plugin exactly once either way. The inner
# sessions run in a subprocess: in-process, pytester drops the modules they import (numpy
# among them), and numpy cannot be imported twice in one process. Phoenix's own plugin is
# left out as the suite leaves it out (pyproject's addopts): it takes seconds to load.
PLUGIN = ("-p", "no:rageval", "-p", "rageval.pytest_plugin", "-p", "no:phoenix")
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"

INNER_RECORDS = '''
from rageval.core.records import records_from_dicts

REFERENCE = "the cat sat on the mat near the door"
RECORDS = records_from_dicts(
    {"id": f"q{i}", "query": "where did the cat sit?", "answer": answer, "reference": REFERENCE,
     "contexts": [{"id": "d1", "text": "a"}, {"id": "d2", "text": "b"}, {"id": "d3", "text": "c"}],
     "judgments": {"d1": 1, "d3": i % 2}}
    for i, answer in enumerate(["the cat sat on the mat near the door", "the cat sat on a mat",
                                "a dog ran", "the cat sat near the door"]))
'''


def test_fixture_and_assertions_in_a_pytest_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_quality=INNER_RECORDS + '''
from rageval.pytest_plugin import assert_rag_quality

def test_good(rag_evaluate):
    results = rag_evaluate(RECORDS, ["rouge1", "p@3"])
    assert len(results.records) == 4
    assert_rag_quality(results, {"rouge1": 0.3, "p@3": 0.3}, over={"cost_usd": 0.0})

def test_bad(rag_evaluate):
    results = rag_evaluate(RECORDS, ["rouge1", "p@3"])
    assert_rag_quality(results, {"rouge1": 0.99, "p@3": 0.3, "rouge2": 0.1},
                       over={"cost_usd": 0.0}, on="ci")
''')
    result = pytester.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "RAG quality check failed: 2 of 4 checks" in out
    assert "rouge1: " in out and " < 0.99 (CI lower bound; mean " in out
    assert "not in the results:" in out
    assert "rouge2: not an output of this run; did you mean 'rouge1'" in out
    assert "passed: p@3 " in out and "cost_usd 0.0 <= 0.0 (this run + replayed from cache)" in out
    assert not list(pytester.path.rglob("summary.json"))  # no --rageval-out: nothing written


def test_rageval_out_writes_every_result_of_a_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_out=INNER_RECORDS + '''
import pytest

def test_twice(rag_evaluate):
    rag_evaluate(RECORDS, ["p@3"])
    rag_evaluate(RECORDS, ["rouge1"])

@pytest.mark.parametrize("k", [1, 2])
def test_param(rag_evaluate, k):
    rag_evaluate(RECORDS, [f"p@{k}"])
''')
    result = pytester.runpytest_subprocess(*PLUGIN, "--rageval-out", "artifacts")
    result.assert_outcomes(passed=3)
    out = pytester.path / "artifacts"
    twice = run_dir_name("test_out.py::test_twice")
    param_2 = run_dir_name("test_out.py::test_param[2]")
    assert sorted(p.name for p in out.iterdir()) == sorted([
        run_dir_name("test_out.py::test_param[1]"), param_2, twice, f"{twice}-2"])
    first = json.loads((out / twice / "summary.json").read_text())
    second = json.loads((out / f"{twice}-2" / "summary.json").read_text())
    assert list(first["metrics"]) == ["p@3"] and "rouge1" in second["metrics"]
    assert Results.load(out / param_2).summary["p@2"].n == 4


def test_the_option_is_in_the_help_and_nothing_is_written_without_it(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*PLUGIN, "--help")
    result.stdout.fnmatch_lines(["rageval (RAG evaluation):",
                                 "*--rageval-out=DIR*write every result of the rag_evaluate*"])
    pytester.makepyfile(test_quiet=f"""
        def test_scores(rag_evaluate):
            assert rag_evaluate({str(DEMO)!r}, ["p@3"]).summary["p@3"].n == 8
    """)
    before = set(pytester.path.iterdir())
    result = pytester.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=1)
    made = {p.name for p in set(pytester.path.iterdir()) - before}
    assert made <= {".pytest_cache", "__pycache__", "runpytest-1"}  # pytester's own only


def test_importing_the_plugin_stays_cheap() -> None:
    code = ("import sys, rageval.pytest_plugin; "
            "print(sorted(m for m in ('numpy', 'polars', 'rich', 'rageval.gate') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- assert_rag_quality's messages -------------------------------------------------------


def _item(value: float, ci: tuple[float, float] | None, n: int = 8) -> MetricSummary:
    return MetricSummary(value, n, 8 - n, ci, "metric:x|rageval:0.1.0")


def _run() -> Results:
    records = [RecordResult(f"q{i}", {}, {}, {}) for i in range(8)]
    summary = {"judge:faithfulness": _item(3.625, (3.25, 4.0)),
               "ndcg@10": _item(0.5, (0.41, 0.6)),
               "rouge1": _item(math.nan, None, n=0)}
    return Results(records, summary, {})


def _message(*args: object, **kwargs: object) -> str:
    with pytest.raises(AssertionError) as caught:
        assert_rag_quality(*args, **kwargs)  # type: ignore[arg-type]
    return str(caught.value)


def test_message_lists_failures_then_passes() -> None:
    message = _message(_run(), {"judge:faithfulness": 4.0, "ndcg@10": 0.45, "rouge1": 0.2,
                                "ndcg@5": 0.1}, over={"ndcg@10": 0.4})
    assert message.splitlines() == [
        "RAG quality check failed: 4 of 5 checks",
        "  judge:faithfulness: 3.625 < 4.0 (mean; 95% CI [3.25, 4.0], n=8)",
        "  rouge1: unscored on every record; needs >= 0.2 (mean)",
        "  ndcg@10: 0.5 > 0.4 (mean; 95% CI [0.41, 0.6], n=8)",
        "not in the results:",
        "  ndcg@5: not an output of this run; did you mean 'ndcg@10'?",
        "passed: ndcg@10 0.5 >= 0.45 (mean)",
    ]


def test_message_on_the_ci() -> None:
    message = _message(_run(), {"ndcg@10": 0.45}, on="ci")
    assert message.splitlines()[1] == \
        "  ndcg@10: 0.41 < 0.45 (CI lower bound; mean 0.5, 95% CI [0.41, 0.6], n=8)"


def test_passing_checks_return_none_and_paths_load(tmp_path: Path) -> None:
    run = _run()
    assert assert_rag_quality(run, {"ndcg@10": 0.45}, over={"judge:faithfulness": 5}) is None
    run.write(tmp_path / "run")
    assert_rag_quality(str(tmp_path / "run"), {"ndcg@10": 0.45})
    assert "3.625 < 4.0" in _message(tmp_path / "run", {"judge:faithfulness": 4})


def _faithfulness(values: list[float]) -> Results:
    records = [RecordResult(f"q{i}", {"judge:faithfulness": v}, {}, {})
               for i, v in enumerate(values)]
    summary = {"judge:faithfulness": _item(sum(values) / len(values), None)}
    return Results(records, summary, {})


def test_regression_against_a_baseline() -> None:
    base = _faithfulness([4.0, 5.0] * 4)
    current = _faithfulness([2.0, 3.0] * 4)
    message = _message(current, baseline=base, max_drop=0.5)
    assert message.splitlines()[1].startswith(
        "  judge:faithfulness: drop 2.0, p=0.0078 (paired randomization test, exact")
    assert message.endswith("(allowed: drop <= 0.5 vs baseline)")
    assert_rag_quality(base, baseline=base)  # no drop at the default max_drop of 0


def test_bad_arguments_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="max_drop needs a baseline"):
        assert_rag_quality(_run(), {"ndcg@10": 0.1}, max_drop=0.1)
    with pytest.raises(UsageError, match="needs minimums"):
        assert_rag_quality(_run())
    with pytest.raises(UsageError, match="finite"):
        assert_rag_quality(_run(), {"ndcg@10": "0.4"})  # type: ignore[dict-item]


@pytest.mark.parametrize(("nodeid", "name"), [
    ("tests/test_a.py::test_b[x/y]", "tests_test_a.py__test_b_x_y_"),
    ("t.py::C::test d", "t.py__C__test_d"),
    ("../..", "_"),
])
def test_run_dir_names(nodeid: str, name: str) -> None:
    readable, digest = run_dir_name(nodeid).rsplit("-", 1)
    assert readable == name and len(digest) == 10


def test_run_dir_names_that_read_alike_stay_apart() -> None:
    assert run_dir_name("t.py::test[x/y]") != run_dir_name("t.py::test[x_y]")


def test_long_run_dir_names_stay_unique() -> None:
    a, b = run_dir_name("t.py::test[" + "a" * 300 + "]"), run_dir_name("t.py::test[" + "a" * 301)
    assert len(a) == 150 and len(b) == 150 and a != b
