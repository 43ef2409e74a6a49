"""A local judge model served on 127.0.0.1, no network and no key (``rageval local-judge``).

- :mod:`.server`: :class:`LocalJudge`, llama-cpp-python's server or llama.cpp's own
  ``llama-server`` for one GGUF model, ready only after a real completion;
- :mod:`.state`: how a server ended, told in words, and the notes that let another process's
  judge run say so;
- :mod:`.build`: llama-cpp-python built for the machine (``python -m rageval.judge.local.build``);
- :mod:`.llama_server`: ``llama-server`` built for the machine
  (``python -m rageval.judge.local.llama_server``).

The two build modules use the standard library only: they run from a fresh clone, before
anything else is installed.
"""

from rageval.judge.local.server import (
    DEFAULT_CONTEXT,
    DEFAULT_MODEL_NAME,
    ENGINES,
    LocalJudge,
    LocalJudgeError,
    default_gguf,
    find_llama_server,
    free_port,
    serving,
)

__all__ = ["DEFAULT_CONTEXT", "DEFAULT_MODEL_NAME", "ENGINES", "LocalJudge", "LocalJudgeError",
           "default_gguf", "find_llama_server", "free_port", "serving"]
