"""bert-score and its stack, loaded lazily: the heavy imports, the installed versions,
bert-score's hash string (built from its version and transformers') and the rescaling
baselines it ships (the per-layer (P, R, F) files for some models and languages).

Nothing here imports torch, transformers or bert-score until a function is called (the
baselines and bert-score's version are read from its files without importing it); a missing
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

import numpy as np

from rageval.core.errors import MissingDependencyError, UsageError


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


def _baseline_path(model: str, lang: str) -> Path | None:
    """bert-score's baseline file for the model and language, or None."""
    spec = importlib.util.find_spec("bert_score")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "rescale_baseline"
    path = root / lang / f"{model}.tsv"
    return path if path.is_file() else None


def _baseline_models(lang: str) -> list[str]:
    spec = importlib.util.find_spec("bert_score")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations))) / "rescale_baseline" / lang
    return sorted(str(p.relative_to(root))[: -len(".tsv")] for p in root.rglob("*.tsv"))


def _baseline(model: str, layer: int, lang: str) -> np.ndarray:
    """The (P, R, F) baseline of ``layer`` (the file's row ``layer``, as bert-score reads it),
    rounded to float32 as bert-score uses it."""
    path = _baseline_path(model, lang)
    if path is None:
        known = ", ".join(_baseline_models(lang)) or "none"
        raise UsageError(
            f"bertscore: rescale=true needs bert-score's baseline for model {model!r} and "
            f"lang={lang}, and bert-score ships none (models with a {lang} baseline: {known})"
        )
    rows = [line.split(",") for line in path.read_text(encoding="utf-8").splitlines()[1:]
            if line.strip()]
    if layer >= len(rows):
        raise UsageError(f"bertscore: the {lang} baseline of {model} has no layer {layer}")
    return np.array([float(v) for v in rows[layer][1:4]], dtype=np.float32).astype(np.float64)
