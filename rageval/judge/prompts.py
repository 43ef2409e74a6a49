"""Judge rubric prompts in one import: rubrics, and their rendering to chat messages.

The work is done in three modules, re-exported here for the rest of the package and for users:

* :mod:`rageval.judge.rubrics`: the rubric TOML files: loading, validation, hashing, the
  built-in prompts directory;
* :mod:`rageval.judge.slots`: untrusted texts: escaping, nonce-tagged slots;
* :mod:`rageval.judge.render`: a rubric and a record rendered to chat messages, and the reply
  schema the rubric asks for.
"""

from __future__ import annotations

from rageval.judge.render import RENDER_VERSION, render, reply_schema, response_format
from rageval.judge.rubrics import INPUTS, Rubric, list_rubrics, load_rubric, prompt_info
from rageval.judge.slots import escape, unescape

__all__ = [
    "INPUTS",
    "RENDER_VERSION",
    "Rubric",
    "escape",
    "list_rubrics",
    "load_rubric",
    "prompt_info",
    "render",
    "reply_schema",
    "response_format",
    "unescape",
]
