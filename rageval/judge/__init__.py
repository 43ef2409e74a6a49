"""The rubric LLM judge: rubrics (load, render, hash), reply parsing, client and cache.

Submodules are imported on demand: ``rageval.judge.prompts`` for rubrics and chat messages,
``rageval.judge.parsing`` for turning a judge reply into a score or an unscored reason.
"""
