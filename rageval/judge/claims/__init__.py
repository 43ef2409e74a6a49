"""Claim-level judging: RAGChecker's claim metrics (``claims:*``), TREC RAG nugget recall
(``nuggets:*``) and ALCE citation support (``citations:*``).

The judge works in small steps, each a prompt file under ``prompts/claims/`` (hashed, versioned,
cached like every judge request): claims are extracted from a text once per (query, text,
model, prompt) and checked in batches (one request labels a list of claims against one piece of
evidence); nuggets are created, rated and assigned. A record may bring its own claims, verdicts,
nuggets and labels, which then cost no request. Every metric is computed from per-record
details (the claims and their verdicts, the nuggets and their labels, the statements and their
citations) that ``records.jsonl`` keeps, so each value can be recomputed from the file alone.

Modules: :mod:`.steps` (prompt files, rendering, reply schemas), :mod:`.step_replies`
(reading replies), :mod:`.supplied` (claims and nuggets given with a record), the pipelines
(:mod:`.claim_pipeline`, :mod:`.nugget_pipeline`, :mod:`.citation_pipeline`, over
:mod:`.asking`), the formulas (:mod:`.claim_scores`, :mod:`.nugget_scores`,
:mod:`.citation_scores`, :mod:`.citation_text`), and the metrics (:mod:`.metrics`,
:mod:`.hooks`).
"""
