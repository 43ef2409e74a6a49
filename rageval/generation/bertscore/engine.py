"""The model at work: a model's tokenizer (bert-score's token ids, truncation and special
tokens) and its truncated transformer (forward passes to L2-normalised token embeddings), one
engine per (model, layer), loaded on first use.

bert-score loads the model (``bert_score.utils.get_model``); rageval runs the forward passes
itself so that every text's embeddings can be cached. An engine's ``namespace`` names what it
computes (model identity, layer, truncation length, library versions) for the cache keys.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rageval.core.errors import UsageError
from rageval.generation.bertscore.cpu_layers import accelerate
from rageval.generation.bertscore.dependencies import _bert_score_utils, _import, _version
from rageval.generation.bertscore.entries import _FORMAT_VERSION
from rageval.generation.bertscore.models import (
    _directory_fingerprint,
    _hub_revision,
    _model_spec,
    _ModelSpec,
)
from rageval.generation.bertscore.progress import _STATS

# Used when a tokenizer declares no maximum length (bert-score itself fails on such a model).
_FALLBACK_MAX_TOKENS = 512
_UNBOUNDED_MAX_LENGTH = 1_000_000


class _Engine:
    """A model's tokenizer (loaded at once) and truncated model (loaded on first need)."""

    def __init__(self, spec: _ModelSpec, layer: int) -> None:
        transformers = _import("transformers")
        self.spec = spec
        self.layer = layer
        try:
            # What bert-score's get_tokenizer(model, use_fast=False) does, without importing
            # bert-score (and matplotlib, pandas) when every embedding comes from the cache.
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(spec.source,
                                                                        use_fast=False)
        except (OSError, ValueError) as exc:
            raise UsageError(_load_failure(spec, exc)) from exc
        tok = self.tokenizer
        limit = tok.model_max_length
        self.max_length = (int(limit) if limit and limit < _UNBOUNDED_MAX_LENGTH
                           else _FALLBACK_MAX_TOKENS)
        # bert-score asks RoBERTa and GPT-2 tokenizers for a leading space (add_prefix_space).
        self.prefix_space = isinstance(tok, (transformers.GPT2Tokenizer,
                                             transformers.RobertaTokenizer))
        self.special_ids = np.array(
            [t for t in (tok.cls_token_id, tok.sep_token_id) if t is not None], dtype=np.int64
        )
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        self.empty_ids = list(tok("", add_special_tokens=True)["input_ids"])
        if spec.bundled:
            identity = spec.label
        elif spec.directory:
            identity = f"{spec.label}@{_directory_fingerprint(spec.source)}"
        else:
            identity = f"{spec.label}@{_hub_revision(spec.source)}"
        key = {
            "format": _FORMAT_VERSION,
            "model": identity,
            "layer": layer,
            "max_tokens": self.max_length,
            "prefix_space": self.prefix_space,
            "transformers": _version("transformers"),
            "torch": _version("torch"),
        }
        self.namespace_info = key
        self.namespace = hashlib.sha256(
            json.dumps(key, sort_keys=True).encode()
        ).hexdigest()[:32]
        self._models: dict[str, Any] = {}
        self.accelerated: set[str] = set()  # devices whose model runs oneDNN linear layers

    def encode(self, texts: Sequence[str]) -> list[tuple[np.ndarray, int]]:
        """Token ids as bert-score's ``sent_encode`` gives them (stripped texts), and each
        text's length before truncation."""
        out: list[tuple[np.ndarray, int]] = [(np.array(self.empty_ids), len(self.empty_ids))
                                             ] * len(texts)
        todo = [k for k, text in enumerate(texts) if text]
        if not todo:
            return out
        inputs = [(" " + texts[k]) if self.prefix_space else texts[k] for k in todo]
        encoded = self.tokenizer(inputs, add_special_tokens=True, max_length=self.max_length,
                                 truncation=True)["input_ids"]
        for k, text, ids in zip(todo, inputs, encoded, strict=True):
            full = len(ids)
            if full >= self.max_length:  # perhaps truncated: count its tokens
                full = len(self.tokenizer(text, add_special_tokens=True, truncation=False,
                                          verbose=False)["input_ids"])
            out[k] = (np.array(ids, dtype=np.int64), full)
        return out

    def model(self, device: str) -> Any:
        if device not in self._models:
            utils = _bert_score_utils()
            try:
                model = utils.get_model(self.spec.source, self.layer, False)
            except AssertionError as exc:
                raise UsageError(f"bertscore: layer={self.layer}: {exc}") from exc
            except (OSError, ValueError) as exc:
                raise UsageError(_load_failure(self.spec, exc)) from exc
            model.eval()
            try:
                model.to(device)
            except (RuntimeError, AssertionError) as exc:
                raise UsageError(f"bertscore: device={device} is not usable: {exc}") from exc
            _STATS["model_loads"] += 1
            if accelerate(model):  # CPU, float32 models only
                self.accelerated.add(device)
            self._models[device] = model
        return self._models[device]

    def embed(self, ids: Sequence[np.ndarray], device: str, batch_size: int,
              progress: Callable[[list[int]], None] | None = None) -> list[np.ndarray]:
        """L2-normalised float32 token embeddings of the chosen layer, one array per text.

        Texts are run longest first, ``batch_size`` at a time, padded within each batch (the
        attention mask hides the padding), as bert-score does. ``progress`` is given the
        indices of the texts of each forward pass once it is done.
        """
        torch = _import("torch")
        model = self.model(device)
        out: list[np.ndarray] = [np.empty((0, 0), dtype=np.float32)] * len(ids)
        with torch.inference_mode():
            for chunk in _length_batches([len(t) for t in ids], batch_size):
                array = self.forward(model, [ids[k] for k in chunk], device).cpu().numpy()
                _STATS["forward_passes"] += 1
                _STATS["texts_embedded"] += len(chunk)
                for row, k in enumerate(chunk):
                    out[k] = np.ascontiguousarray(array[row, : len(ids[k])])
                if progress is not None:
                    progress(chunk)
        return out

    def forward(self, model: Any, ids: Sequence[np.ndarray], device: str) -> Any:
        """One forward pass (call it in inference mode): the L2-normalised float32 embeddings
        of ``ids`` (longest first) on ``device``, one row per text, as wide as the first (a
        row's positions past its text's length are padding, to be ignored)."""
        torch = _import("torch")
        width = len(ids[0])
        x = torch.full((len(ids), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for row, tokens in enumerate(ids):
            x[row, : len(tokens)] = torch.from_numpy(tokens)
            mask[row, : len(tokens)] = 1
        hidden = model(x.to(device), attention_mask=mask.to(device))[0].float()
        return hidden / torch.norm(hidden, dim=-1).unsqueeze(-1)


def _length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped for forward passes: longest first, at most ``batch_size`` texts, and a
    new batch where padding would waste most of it (a text under half the batch's width, or
    more than ``batch_size * 128`` padded tokens), so one long text does not pad the others to
    512 tokens."""
    order = sorted(range(len(lengths)), key=lambda k: -lengths[k])
    budget = batch_size * _TOKENS_PER_TEXT
    batches: list[list[int]] = []
    current: list[int] = []
    for k in order:
        if current:
            width = lengths[current[0]]
            if (len(current) == batch_size or (len(current) + 1) * width > budget
                    or 2 * lengths[k] < width):
                batches.append(current)
                current = []
        current.append(k)
    if current:
        batches.append(current)
    return batches


_TOKENS_PER_TEXT = 128


def _load_failure(spec: _ModelSpec, exc: Exception) -> str:
    where = ("the directory" if spec.directory or spec.bundled
             else "the Hugging Face hub or its local cache (offline runs need it cached)")
    return f"bertscore: cannot load model {spec.source!r} from {where}: {exc}"


_ENGINES: dict[tuple[str, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine(model: str, layer: int) -> _Engine:
    spec = _model_spec(model)
    with _ENGINES_LOCK:
        engine = _ENGINES.get((spec.source, layer))
        if engine is None:
            engine = _ENGINES[(spec.source, layer)] = _Engine(spec, layer)
        return engine


def unload_models() -> None:
    """Forget loaded tokenizers and models (the next score loads them again)."""
    with _ENGINES_LOCK:
        _ENGINES.clear()
