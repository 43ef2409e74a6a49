"""bert-score's rescaling baselines: the per-layer (P, R, F) files it ships for some models and
languages, read without importing bert-score."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from rageval.core.errors import UsageError


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
