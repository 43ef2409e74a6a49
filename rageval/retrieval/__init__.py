"""Retrieval metrics exactly as trec_eval 10.0 computes them.

- :mod:`~rageval.retrieval.measures`: the ``p``, ``recall``, ``ndcg``, ``map`` ... metrics, and
  their shared base;
- :mod:`~rageval.retrieval.ranking`: records and TREC files as one columnar ranking;
- :mod:`~rageval.retrieval.kernels`: the vectorised per-query measures over that ranking;
- :mod:`~rageval.retrieval.trec`: TREC qrels and run files, read and written;
- :mod:`~rageval.retrieval.trec_eval`: the trec_eval-compatible command;
- :mod:`~rageval.retrieval.fusion`: rank fusion of runs.
"""
