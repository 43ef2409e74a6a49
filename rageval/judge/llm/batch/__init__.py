"""Batch judging (``--judge-batch``): the requests the cache lacks sent through a provider's
batch API (OpenAI's files and batches endpoints) instead of one chat completion each.

:mod:`.lines` is the JSONL a batch is made of and what comes back; :mod:`.provider` the
files and batches endpoints; :mod:`.state` the record of pending batches kept beside the
cache, so that a run killed while its batch is pending attaches to it when run again;
:mod:`.run` submits, polls and stores; :mod:`.offline` writes a batch file for an offline
batch runner (vLLM's) and reads its output into the cache. A reply that came by batch is
stored under the cache key an online reply of the same request gets, so scoring, signatures
and offline replay cannot tell them apart; only its meta says ``"via": "batch"``.
"""
