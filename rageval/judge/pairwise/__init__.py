"""The pairwise judge, ``judge:pairwise``: :mod:`.prompt` (its prompt file, rendering and
verdict parsing) and :mod:`.metric` (the metric, built on the rubric judge's)."""
