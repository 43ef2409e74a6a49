"""The LLM judge, in rooms that build on each other:

- :mod:`.prompting` and :mod:`.local` at the bottom: the text of prompts and replies, and a
  local judge model;
- :mod:`.llm` above them: asking a judge model and caching its replies;
- :mod:`.rubric` and :mod:`.claims` above that, side by side: the rubric judge and the
  claim-level metrics;
- :mod:`.pairwise` on the rubric judge;
- :mod:`.registration` and :mod:`.catalog` on top: the metrics registered, and the tables
  ``rageval metrics`` prints.

A room imports only from itself and the rooms below it (``tests/test_architecture.py``).
Submodules are imported on demand.
"""
