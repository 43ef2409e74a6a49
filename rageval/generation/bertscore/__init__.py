"""BERTScore (Zhang et al. 2020) on bert-score, with token embeddings cached in memory and on disk.

Values are bert-score's: ``bert_score.score(answers, references, model_type=..., num_layers=...)``
(see :class:`BertScore` for the definition and for the few places where rageval departs from
bert-score on purpose). bert-score loads the model and tokenizer; rageval runs the forward passes
and the greedy matching itself so that the token embeddings of every text are computed once and
kept: in memory for the life of the process (``RAGEVAL_EMBEDDING_MEMORY_MB``, default 2048) and
on disk across runs, in pack files of many texts each, per (model, layer), under
``$RAGEVAL_EMBEDDING_CACHE``, ``$RAGEVAL_CACHE_DIR/bertscore`` or ``~/.cache/rageval/bertscore``
(details in :mod:`~.embeddings` and :mod:`~.disk_cache`).

- :mod:`~.metric`: the registered ``bertscore`` metric: parameters, name, signature, scoring;
- :mod:`~.models`: the default model and layer, model specs, dependency checks;
- :mod:`~.engine`: tokenisation (truncation, special tokens) and forward passes of a model;
- :mod:`~.cpu_layers`: on a CPU, the model's linear layers run on oneDNN (same values, faster);
- :mod:`~.embeddings`: each text's embeddings from memory, disk or the model;
- :mod:`~.disk_cache`, :mod:`~.packs` and :mod:`~.entries`: the cache on disk, its pack files
  and the entries they hold;
- :mod:`~.weights`: plain and idf token weights; :mod:`~.matching`: greedy matching to P, R, F;
- :mod:`~.resident`: on a GPU, the embeddings stay on the device from the forward passes to
  the matching, which runs there;
- :mod:`~.dependencies`: lazy imports, versions, bert-score's hash string and its rescaling
  baselines; :mod:`~.progress`: counters of the embedding work, and how far the run's
  embedding is, for the run's step hook.

Importing this package imports neither torch nor bert-score; they are loaded on first use, and a
missing one raises :class:`~rageval.core.errors.MissingDependencyError` naming the ``bertscore``
extra.
"""

from rageval.generation.bertscore.dependencies import bert_score_hash
from rageval.generation.bertscore.disk_cache import CACHE_ENV, CACHE_ROOT_ENV, default_cache_dir
from rageval.generation.bertscore.embeddings import MEMORY_ENV, clear_memory_cache
from rageval.generation.bertscore.engine import unload_models
from rageval.generation.bertscore.metric import ZERO_IDF, BertScore  # registers the metric
from rageval.generation.bertscore.models import (
    DEFAULT_LAYER,
    DEFAULT_MODEL,
    DEFAULT_MODEL_PACKAGE,
    PAPER_MODEL,
)
from rageval.generation.bertscore.progress import cache_stats, reset_cache_stats

__all__ = [
    "CACHE_ENV",
    "CACHE_ROOT_ENV",
    "DEFAULT_LAYER",
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_PACKAGE",
    "MEMORY_ENV",
    "PAPER_MODEL",
    "ZERO_IDF",
    "BertScore",
    "bert_score_hash",
    "cache_stats",
    "clear_memory_cache",
    "default_cache_dir",
    "reset_cache_stats",
    "unload_models",
]
