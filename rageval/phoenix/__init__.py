"""Scores back to Arize Phoenix: each record's values as annotations on the span it came from.

Records read from traces (:mod:`rageval.inputs.traces`) remember their trace and span;
:func:`~rageval.phoenix.annotations.annotate_run` writes a run's values to those spans through
Phoenix's own client, under the identifier ``rageval``, so that a rerun updates them.
"""

from __future__ import annotations

from rageval.phoenix.annotations import AnnotationReport, annotate_run, span_annotations

__all__ = ["AnnotationReport", "annotate_run", "span_annotations"]
