"""bert-score and its stack, loaded lazily: the heavy imports, the installed versions, and
bert-score's hash string (built from its version and transformers').

Nothing here imports torch, transformers or bert-score until a function is called; a missing
one raises :class:`~rageval.core.errors.MissingDependencyError` naming the ``bertscore`` extra.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from rageval.core.errors import MissingDependencyError


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError("bert-score", "bertscore") from exc


def _bert_score_utils() -> Any:
    return _import("bert_score.utils")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


def _bert_score_internal_version() -> str:
    """``bert_score.__version__`` (what its hash shows; 0.3.13 says 0.3.12), read without
    importing bert-score (and torch)."""
    loaded = sys.modules.get("bert_score")
    if loaded is not None:
        return str(loaded.__version__)
    spec = importlib.util.find_spec("bert_score")
    if spec is None or spec.origin is None:
        return "missing"
    found = re.search(r"""__version__\s*=\s*["']([^"']+)["']""",
                      Path(spec.origin).read_text(encoding="utf-8"))
    return found.group(1) if found else _version("bert-score")


def bert_score_hash(model_label: str, layer: int, idf: bool, rescale: bool) -> str:
    """bert-score's hash string, as ``bert_score.utils.get_hash`` renders it for
    ``bert_score.score`` with the default tokenizer and no custom baseline."""
    text = (f"{model_label}_L{layer}{'_idf' if idf else '_no-idf'}"
            f"_version={_bert_score_internal_version()}(hug_trans={_version('transformers')})")
    return text + ("-rescaled" if rescale else "")
