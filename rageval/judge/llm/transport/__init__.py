"""Sending a judge's requests: OpenAI-compatible chat completions, many at once.

- :mod:`.client`: :class:`~rageval.judge.llm.transport.client.JudgeClient`, many requests to
  one model at one endpoint, with retries, a stop rule and a bound on the first reply
  (:mod:`.first_reply`);
- :mod:`.backend`, :mod:`.sdk`: where the requests go, a
  :class:`~rageval.judge.llm.transport.backend.ChatBackend` (the openai SDK's chat completions),
  one per endpoint and model of a run, owning what the run learns of them;
- :mod:`.pool`: the :class:`~rageval.judge.llm.transport.pool.Scheduler` running them,
  ``concurrency`` at a time, within a rate, stopping the run with one error saying why;
- :mod:`.endpoint`, :mod:`.negotiation`, :mod:`.formats`, :mod:`.params`, :mod:`.requests`:
  the endpoint without its secrets, the structured-output formats it accepts, the request
  parameters it refuses (a reasoning model's), one request and its result.
"""
