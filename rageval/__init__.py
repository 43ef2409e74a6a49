"""rageval: end-to-end evaluation of retrieval-augmented generation.

The public API is synchronous and small::

    import rageval
    records = rageval.load_records("records.jsonl")
    results = rageval.evaluate(records, ["ndcg@10", "mrr", "recall@5"])
    results.write("out/")            # records.jsonl + summary.json
    print(results.summary["ndcg@10"].value)
    run = rageval.Results.load("out/")          # a run directory, back as Results
    comparison = rageval.compare_runs(["out/a", "out/b"])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rageval.core.version import __version__

__all__ = ["Results", "__version__", "compare_runs", "evaluate", "load_records"]

if TYPE_CHECKING:
    from rageval.api import evaluate
    from rageval.compare.runs import compare_runs
    from rageval.core.records import load_records
    from rageval.core.results import Results


def __getattr__(name: str) -> Any:
    # Lazy so that `import rageval` stays cheap (no polars/numpy until needed).
    if name == "evaluate":
        from rageval.api import evaluate

        return evaluate
    if name == "load_records":
        from rageval.core.records import load_records

        return load_records
    if name == "Results":
        from rageval.core.results import Results

        return Results
    if name == "compare_runs":
        from rageval.compare.runs import compare_runs

        return compare_runs
    raise AttributeError(f"module 'rageval' has no attribute {name!r}")
