"""rageval: end-to-end evaluation of retrieval-augmented generation.

The public API is synchronous and small::

    import rageval
    records = rageval.load_records("records.jsonl")
    results = rageval.evaluate(records, ["ndcg@10", "mrr", "recall@5"])
    results.write("out/")            # records.jsonl + summary.json
    print(results.summary["ndcg@10"].value)
    frame = results.to_pandas()      # one row per record, one column per metric
    run = rageval.Results.load("out/")          # a run directory, back as Results
    comparison = rageval.compare_runs(["out/a", "out/b"])

``dir(rageval)`` lists every public name; each is imported on first use, so that
``import rageval`` stays cheap (no polars, numpy, torch or openai until needed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rageval.core.version import __version__

# Public name -> the module that defines it.
_PUBLIC: dict[str, str] = {
    "evaluate": "rageval.api",
    "load_records": "rageval.core.records",
    "Record": "rageval.core.records",
    "Context": "rageval.core.records",
    "Results": "rageval.core.results",
    "MetricSummary": "rageval.core.results",
    "RecordResult": "rageval.core.results",
    "compare_runs": "rageval.compare.runs.compare",
    "JudgeOptions": "rageval.judge.llm.options",
    "read_eval_file": "rageval.config",
    "InputSpec": "rageval.inputs",
    "assert_rag_quality": "rageval.gate.assertion",
}

__all__ = [
    "Context",
    "InputSpec",
    "JudgeOptions",
    "MetricSummary",
    "Record",
    "RecordResult",
    "Results",
    "__version__",
    "assert_rag_quality",
    "compare_runs",
    "evaluate",
    "load_records",
    "read_eval_file",
]

if TYPE_CHECKING:
    from rageval.api import evaluate
    from rageval.compare.runs.compare import compare_runs
    from rageval.config import read_eval_file
    from rageval.core.records import Context, Record, load_records
    from rageval.core.results import MetricSummary, RecordResult, Results
    from rageval.gate.assertion import assert_rag_quality
    from rageval.inputs import InputSpec
    from rageval.judge.llm.options import JudgeOptions


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'rageval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
