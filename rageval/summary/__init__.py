"""A run's summary: each output's value (a correctly rounded mean, or the metric's corpus
figure), its interval, counts and signature, built as the batches finish (:mod:`.parts`), kept
whole or as running sums past the records held (:mod:`.online`), over conversations when the
run has them (:mod:`.grouped`)."""

from rageval.summary.parts import MetricStore, SummaryParts, summarise

__all__ = ["MetricStore", "SummaryParts", "summarise"]
