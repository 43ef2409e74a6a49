"""Asking a judge model and keeping its replies: what every kind of judge in rageval shares.

- :mod:`.config`: :class:`~rageval.judge.llm.config.JudgeConfig`, the judge's configuration,
  each option declared on its field; :mod:`.session`: a run's judge state; :mod:`.options`:
  :class:`~rageval.judge.llm.options.JudgeOptions`, the configuration as ``evaluate`` takes it;
- :mod:`.client`, :mod:`.pool`, :mod:`.sdk`, :mod:`.first_reply`: OpenAI-compatible chat
  completions, many at once, with retries, a stop rule and a bound on the first reply;
- :mod:`.endpoint`, :mod:`.negotiation`, :mod:`.formats`, :mod:`.served`: the endpoint without
  its secrets, the structured-output format it accepts, the model it serves;
- :mod:`.requests`, :mod:`.replies`: one request and its result; the units of a run, gathered
  from the cache or the judge;
- :mod:`.cache`: the reply cache (SQLite, its entries and its JSONL export);
- :mod:`.checks`, :mod:`.misses`: the checks before a run asks, the manifest section after, and
  why an offline replay misses.
"""
