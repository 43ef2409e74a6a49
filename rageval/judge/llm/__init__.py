"""Asking a judge model and keeping its replies: what every kind of judge in rageval shares.

- :mod:`.transport`: sending the requests, OpenAI-compatible chat completions many at once,
  through a :class:`~rageval.judge.llm.transport.backend.ChatBackend`, one per endpoint and
  model of a run, which owns what the run learns of them (the wire formats and the request
  parameters it takes);
- :mod:`.batch`: the same requests through a provider's batch API (``--judge-batch``),
  resumable, and a batch file for an offline runner.

Replies and bookkeeping, what a run keeps:

- :mod:`.config`, :mod:`.options`, :mod:`.session`, :mod:`.members`:
  :class:`~rageval.judge.llm.config.JudgeConfig`, the judge's configuration, each option
  declared on its field; :class:`~rageval.judge.llm.options.JudgeOptions`, the configuration
  as ``evaluate`` takes it; :class:`~rageval.judge.llm.session.JudgeSession`, a run's judge
  state (budget, shared limits and cache, backends, pairwise opponents); the members of a
  judge panel;
- :mod:`.units`, :mod:`.replies`, :mod:`.served`: a request and what came back for it; the
  units of a run, gathered from the cache or the judge; and the model that served the cached
  replies;
- :mod:`.cache`, :mod:`.costs`: the reply cache (SQLite, its entries and its JSONL export); token
  counts, caps and a dry run's plan;
- :mod:`.run_stats`, :mod:`.checks`, :mod:`.misses`: what the judge did in a run, the checks
  before a run asks, the manifest section after, and why an offline replay misses.
"""
