"""rageval's pytest plugin: quality gates as ordinary tests.

Registered through the ``pytest11`` entry point, so any project that installs rageval gets:

- the fixture ``rag_evaluate``: :func:`rageval.evaluate` (same arguments, same
  :class:`~rageval.core.results.Results`), whose results are also written under
  ``--rageval-out DIR`` when that option is given (``DIR/<test id>``, a CI artifact);
- :func:`assert_rag_quality`, importable from here: minimums, maximums and a baseline
  comparison, failing with one readable line per failed check::

      from rageval.pytest_plugin import assert_rag_quality

      def test_answers(rag_evaluate, records):
          results = rag_evaluate(records, ["rouge1", "p@3"])
          assert_rag_quality(results, {"rouge1": 0.4, "p@3": 0.5})

pytest loads this module in every session of every project that installs rageval: it imports
nothing heavy (polars, numpy, rich) until a test uses it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from rageval.core.results import Results
    from rageval.gate.assertion import assert_rag_quality, quality_message

__all__ = ["assert_rag_quality", "quality_message", "rag_evaluate"]

# Longest directory name written under --rageval-out (file systems stop at 255 bytes).
_MAX_NAME = 150


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rageval", "rageval (RAG evaluation)")
    group.addoption("--rageval-out", metavar="DIR", default=None,
                    help="write every result of the rag_evaluate fixture under DIR/<test id> "
                    "(records.jsonl + summary.json, e.g. as a CI artifact)")


@pytest.fixture
def rag_evaluate(request: pytest.FixtureRequest) -> Callable[..., Results]:
    """:func:`rageval.evaluate` for a test: ``rag_evaluate(records, metrics, **kwargs)``.

    With ``--rageval-out DIR`` each result is also written to ``DIR/<test id>`` (the second
    call of one test to ``DIR/<test id>-2``, and so on).
    """
    out = request.config.getoption("rageval_out")
    calls = 0

    from rageval.api import evaluate  # here, not at import: only tests that use it pay

    @functools.wraps(evaluate)
    def run(records: Any, metrics: Iterable[Any], **kwargs: Any) -> Results:
        nonlocal calls
        results = evaluate(records, metrics, **kwargs)
        if out:
            calls += 1
            base = request.config.invocation_params.dir / out
            name = run_dir_name(request.node.nodeid)
            results.write(base / (name if calls == 1 else f"{name}-{calls}"))
        return results

    return run


def run_dir_name(nodeid: str) -> str:
    """A test id as one directory name: ``tests/test_a.py::test_b[x/y]`` ->
    ``tests_test_a.py__test_b_x_y_-<hash>``. The hash of the whole id keeps names unique where
    the readable part is cut or two ids read alike (``[x/y]`` and ``[x_y]``)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", nodeid).strip(".") or "test"
    digest = hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:10]
    return f"{name[:_MAX_NAME - len(digest) - 1]}-{digest}"


def __getattr__(name: str) -> Any:
    # assert_rag_quality lives with the gate (no pytest needed to use it); imported here on
    # first use so that loading the plugin stays cheap.
    if name in ("assert_rag_quality", "quality_message"):
        from rageval.gate import assertion

        return getattr(assertion, name)
    raise AttributeError(f"module 'rageval.pytest_plugin' has no attribute {name!r}")
