"""BLEU through sacrebleu: sentence BLEU per record, corpus BLEU in the summary.

sacrebleu supplies the tokenisers, smoothing and formula; each record's sufficient statistics
(``sys_len``, ``ref_len``, matched and total n-gram counts, n = 1..4) are sacrebleu's own, computed
faster by :mod:`rageval.generation.bleu_stats`, and kept so that the corpus figure and its
bootstrap CI are recomputed by summing them, never by tokenising again (as sacrebleu does):
each record's statistics are read back from its kept ``stats`` or its ``details``
(:func:`stats_matrix`) for the summary's bootstrap and, through :meth:`Bleu.corpus_row`,
``rageval compare``.

Per record the values are exactly ``BLEU(effective_order=True, ...).sentence_score(answer,
references)``; over the records scored, the summary's headline is exactly
``sacrebleu.corpus_bleu(answers, reference_streams, ...)``.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import (
    Batch,
    Metric,
    MetricResult,
    ScoreOptions,
    answer_reference_reason,
)
from rageval.core.params import Param
from rageval.core.registry import register
from rageval.core.scale import RATIO, Scale
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__
from rageval.generation.bleu_stats import MAX_ORDER, corpus_statistics

if TYPE_CHECKING:
    from sacrebleu.metrics.bleu import BLEU as SacreBLEU
    from sacrebleu.metrics.bleu import BLEUScore

    from rageval.core.records import Record


SMOOTH_METHODS = ("exp", "floor", "add-k", "none")
# Components after the headline, in output order: "<name>.sentence", "<name>.bp", ...
COMPONENTS = ("sentence", "bp", "ratio", *(f"p{n}" for n in range(1, MAX_ORDER + 1)))
UNKNOWN_NREFS = "?"  # before scoring, the number of references is not known yet

Stats = list[int]  # sacrebleu's layout: [sys_len, ref_len, correct_1..4, total_1..4]
# sys_len, ref_len, then the matches and totals of each n-gram order (sacrebleu's layout).
STATS_WIDTH = 2 + 2 * MAX_ORDER


@register
class Bleu(Metric):
    """BLEU: n-gram precision of the answer against its references, with a brevity penalty.

    **Definition** (Papineni et al. 2002, as computed by sacrebleu, Post 2018). Both texts are
    tokenised (``tokenize``, default ``13a``, the mteval-v13a tokeniser of WMT) and optionally
    lowercased. For n = 1..4, the clipped precision p_n is the number of answer n-grams found in
    a reference, each counted at most as often as it occurs in the reference that has it most
    often, divided by the number of answer n-grams. With the answer length c and the reference
    length r closest to c (the shorter one on a tie), the brevity penalty is BP = 1 if c >= r,
    else exp(1 - r/c) (0 for an empty answer). BLEU = BP * exp(mean of log p_n) * 100.

    **Per record** ``bleu`` is sentence BLEU, exactly sacrebleu's
    ``BLEU(effective_order=True, ...).sentence_score(answer, references)``: orders the answer is
    too short to have are left out, and ``smooth`` (default ``exp``, as sacrebleu) replaces zero
    precisions. Components, one value per record: ``bleu.sentence`` (the same sentence BLEU),
    ``bleu.bp`` (brevity penalty, 0-1), ``bleu.ratio`` (c / r, sacrebleu's ratio, 0 when r = 0)
    and ``bleu.p1`` .. ``bleu.p4`` (sacrebleu's ``precisions``: on its 0-100 scale, smoothed
    where smoothing applies, 0 after an order the answer is too short for). ``details`` holds
    the sufficient statistics ``counts`` and ``totals`` (matched and total n-grams, n = 1..4),
    ``sys_len`` (answer length in tokens), ``ref_len`` (closest reference length), ``nrefs``,
    and again ``precisions``, ``bp`` and ``ratio``.

    **In the summary** the headline ``bleu`` is *corpus* BLEU (``aggregate: "corpus"``): the
    statistics of the scored records are summed and BLEU is computed once from the sums, exactly
    ``sacrebleu.corpus_bleu(answers, reference_streams, ...)`` with the same options (no
    effective order, as sacrebleu's default). Its 95% CI resamples records and recomputes corpus
    BLEU from their statistics. ``bleu.sentence`` in the summary is the *mean of sentence BLEU*
    (``aggregate: "mean"``), a different number, usually lower: short answers weigh as much as
    long ones and each sentence is smoothed on its own. The other components are means of the
    per-record values too (not the corpus BP or precisions; :meth:`corpus_score` gives those).

    **Multiple references** follow sacrebleu: n-gram counts are clipped to the maximum count over
    the references, r is the closest reference length. Records may have different numbers of
    references; the corpus figure then equals ``corpus_bleu`` with shorter reference streams
    padded with ``None``, and the signature says ``nrefs:var`` (as sacrebleu).

    **Edge cases.** A record without an answer or without a reference is unscored with that
    reason. An empty answer is scored as sacrebleu does: BLEU 0, BP 0 (and it adds its
    reference length to the corpus). An empty reference is used as is (length 0). A record with
    no matching unigram gets BLEU 0 whatever the smoothing (sacrebleu's early stop). As in
    sacrebleu, corpus BLEU has no effective order: if no answer has 4 tokens, it is 0 even when
    every sentence BLEU is 100.

    **Options.** ``tokenize``: any tokeniser of sacrebleu (13a, intl, zh, char, none; ja-mecab,
    ko-mecab and the spm family need sacrebleu's extras). ``lowercase``: case-insensitive BLEU.
    ``smooth``: exp (default), floor, add-k or none (Chen and Cherry 2014); ``smooth_value`` sets
    the floor (default 0.1) or k (default 1) and is refused with the other methods.

    **Signature**: sacrebleu's fields ``nrefs|case|eff|tok|smooth`` as sacrebleu prints them for
    the corpus figure (``eff:no``), ``sentence_eff:yes`` for the per-record values, then the
    sacrebleu and rageval versions.

    Range 0-100 (sacrebleu's scale), higher is better.

    Example: answer "the cat sat on the mat", reference "the cat sat on a mat": 4 n-gram orders
    match 5/6, 3/5, 2/4, 1/3, BP = 1, BLEU = 100 * (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = 53.73.
    ``rageval.evaluate(records, ["bleu", "bleu(tokenize=intl,lowercase=true)"])``.

    References: K. Papineni, S. Roukos, T. Ward, W.-J. Zhu. BLEU: a Method for Automatic
    Evaluation of Machine Translation. ACL 2002. M. Post. A Call for Clarity in Reporting BLEU
    Scores. WMT 2018.
    """

    family = "lexical"
    value_range = (0.0, 100.0)
    libraries = ("sacrebleu",)
    base = "bleu"
    summary = "BLEU (sacrebleu), 0-100: sentence BLEU per record, corpus BLEU in the summary"
    needs = frozenset({"answer", "reference"})
    params = (
        Param("tokenize", str, "13a",
              "sacrebleu tokeniser: 13a, intl, zh, char, none (ja-mecab, ko-mecab, spm, "
              "flores101, flores200 need sacrebleu extras)"),
        Param("lowercase", bool, False, "lowercase answer and references before matching"),
        Param("smooth", str, "exp", "sacrebleu smoothing method (Chen and Cherry 2014)",
              choices=SMOOTH_METHODS),
        Param("smooth_value", float, None,
              "floor value (default 0.1) or k of add-k (default 1); only for floor and add-k",
              minimum=0.0),
    )

    def __init__(
        self, cutoff: int | None = None, options: ScoreOptions | None = None, **params: Any
    ) -> None:
        super().__init__(cutoff, options, **params)
        _check_config(self.values)

    # ---- names and signature ------------------------------------------------------------

    def table_names(self) -> list[str]:
        """Corpus BLEU and the mean of sentence BLEU: both numbers, never one for the other."""
        return self.output_names()[:2]

    def output_names(self) -> list[str]:
        head = str(self.name)
        return [head, *(f"{head}.{part}" for part in COMPONENTS)]

    def output_scale(self, output: str) -> Scale:
        """sacrebleu's 0-100, but the brevity penalty's 0-1 and the length ratio's >= 0."""
        return {"bp": RATIO, "ratio": (0.0, None)}.get(output.rpartition(".")[2],
                                                          self.value_range)

    def signature(self) -> Signature:
        """The signature before scoring; ``nrefs`` is only known from the data (``nrefs:?``)."""
        return self._signature(UNKNOWN_NREFS)

    def result_signature(self, result: MetricResult) -> Signature:
        """The signature of scored results: ``nrefs`` is the reference count of the scored
        records, or ``var`` when it varies (as sacrebleu prints it)."""
        if result.stats is not None:  # the last column: each record's references (0: unscored)
            counts = {int(n) for n in np.unique(result.stats[:, STATS_WIDTH]) if n > 0}
            label = UNKNOWN_NREFS if not counts else (
                str(counts.pop()) if len(counts) == 1 else "var")
            return self._signature(label)
        return self._signature(_nrefs_label(result.details or []))

    def _signature(self, nrefs: str) -> Signature:
        bleu = _sacrebleu(self.values, effective_order=False)
        bleu.num_refs = 1  # sacrebleu renders only after scoring; nrefs is replaced below
        info = bleu.get_signature().info
        return Signature.of([
            Field("metric", self.base, "m"),
            Field("nrefs", nrefs, "#"),
            Field("case", str(info["case"]), "c"),
            Field("eff", str(info["eff"]), "e"),
            Field("tok", str(info["tok"])),
            Field("smooth", str(info["smooth"]), "s"),
            Field("sentence_eff", "yes", "se"),
            Field("sacrebleu", str(info["version"]), "sb", version=True),
            Field("rageval", __version__, "v", version=True),
        ])

    # ---- scoring ------------------------------------------------------------------------

    def score(self, batch: Batch) -> MetricResult:
        records = batch.records
        reasons = [answer_reference_reason(r) for r in records]
        scored = [i for i, reason in enumerate(reasons) if reason is None]
        names = self.output_names()
        values = {name: np.full(len(records), np.nan) for name in names}
        details: list[dict[str, Any] | None] = [None] * len(records)
        rows = self._segment_stats([records[i] for i in scored])
        stats = np.zeros((len(records), STATS_WIDTH + 1), dtype=np.int32)
        for i, row in zip(scored, rows, strict=True):
            result = self._compute(row, effective_order=True)
            for name, value in zip(names, _outputs(result), strict=True):
                values[name][i] = value
            details[i] = _details(row, result, len(records[i].references))
            stats[i, :STATS_WIDTH] = row
            stats[i, STATS_WIDTH] = len(records[i].references)
        return MetricResult(values, reasons, details, stats)

    def _segment_stats(self, records: Sequence[Record]) -> list[Stats]:
        """sacrebleu's per-segment statistics, in one pass over the batch."""
        if not records:
            return []
        width = max(len(r.references) for r in records)
        streams = [[r.references[j] if j < len(r.references) else None for r in records]
                   for j in range(width)]
        answers = [r.answer or "" for r in records]
        bleu = _sacrebleu(self.values, effective_order=True)
        # What sacrebleu's _extract_corpus_statistics returns (the method sentence_score,
        # corpus_score and its significance tests all use), computed faster; None pads the
        # reference streams of records with fewer references, as sacrebleu allows.
        return corpus_statistics(bleu, answers, streams)

    def _compute(self, stats: Stats, *, effective_order: bool) -> BLEUScore:
        """BLEU from statistics, as sacrebleu's ``_compute_score_from_stats`` does."""
        from sacrebleu.metrics.bleu import BLEU as SacreBLEU

        return SacreBLEU.compute_bleu(
            correct=list(stats[2 : 2 + MAX_ORDER]),  # copies: add-k smoothing adds in place
            total=list(stats[2 + MAX_ORDER :]),
            sys_len=int(stats[0]),
            ref_len=int(stats[1]),
            smooth_method=self.values["smooth"],
            smooth_value=self.values["smooth_value"],
            effective_order=effective_order,
            max_ngram_order=MAX_ORDER,
        )

    # ---- corpus -------------------------------------------------------------------------

    def corpus_value(self, result: MetricResult, indices: np.ndarray) -> float | None:
        """Corpus BLEU of the records ``indices`` (repeats allowed: a bootstrap resample)
        from their summed statistics."""
        matrix = stats_matrix(result)
        if len(indices) * 4 < len(matrix):
            summed = matrix[indices].sum(axis=0, dtype=np.int64)
        else:
            # A resample of a long run: how often each record was drawn, times the
            # statistics, reads them in order (a gather of random rows misses the caches).
            # Sums of integers below 2**53 are exact in float64.
            counts = np.bincount(indices, minlength=len(matrix)).astype(np.float64)
            summed = np.rint(stats_columns(result, matrix) @ counts).astype(np.int64)
        return self.corpus_from_sums(summed)

    def corpus_sums(self, stats: np.ndarray) -> np.ndarray:
        """sacrebleu's sufficient statistics of each record (zeros for an unscored one)."""
        return stats[:, :STATS_WIDTH]

    def corpus_row(self, detail: Mapping[str, Any]) -> np.ndarray:
        return np.array(stats_row(detail), dtype=np.int64)

    def corpus_from_sums(self, sums: np.ndarray) -> float:
        return float(self._compute([int(v) for v in sums], effective_order=False).score)

    def signature_rows(self, part: MetricResult) -> MetricResult:
        """One statistics row for each reference count among the part's records (the
        signature's ``nrefs``)."""
        if part.stats is None:
            return super().signature_rows(part)
        _, first = np.unique(part.stats[:, STATS_WIDTH], return_index=True)
        return MetricResult({}, [], None, part.stats[first])

    def corpus_score(self, details: Sequence[Mapping[str, Any] | None]) -> BLEUScore:
        """sacrebleu's corpus ``BLEUScore`` (score, precisions, bp, ratio, lengths) recomputed
        from per-record ``details`` (e.g. read back from ``records.jsonl``); None entries
        (unscored records) are skipped."""
        rows = [stats_row(d) for d in details if d is not None]
        if not rows:
            raise ValueError("corpus BLEU needs at least one scored record")
        summed = np.asarray(rows, dtype=np.int64).sum(axis=0)
        return self._compute(summed.tolist(), effective_order=False)


# ---- helpers ----------------------------------------------------------------------------


def _check_config(values: Mapping[str, Any]) -> None:
    from sacrebleu.metrics.bleu import BLEU as SacreBLEU

    tokenize = values["tokenize"]
    if tokenize not in SacreBLEU.TOKENIZERS:
        known = ", ".join(SacreBLEU.TOKENIZERS)
        raise UsageError(f"bleu: tokenize={tokenize} is not a sacrebleu tokeniser: {known}")
    smooth = values["smooth"]
    if values["smooth_value"] is not None and SacreBLEU.SMOOTH_DEFAULTS[smooth] is None:
        raise UsageError(
            f"bleu: smooth_value applies to smooth=floor or smooth=add-k, not smooth={smooth}"
        )
    _sacrebleu(values, effective_order=True)  # a tokeniser with missing extras fails here


def _sacrebleu(values: Mapping[str, Any], *, effective_order: bool) -> SacreBLEU:
    """A fresh sacrebleu BLEU object (it holds per-run state: tokeniser caches, nrefs)."""
    from sacrebleu.metrics.bleu import BLEU as SacreBLEU

    try:
        return SacreBLEU(
            lowercase=values["lowercase"],
            force=True,  # only silences sacrebleu's "looks tokenised" warning; same values
            tokenize=values["tokenize"],
            smooth_method=values["smooth"],
            smooth_value=values["smooth_value"],
            max_ngram_order=MAX_ORDER,
            effective_order=effective_order,
        )
    except (ImportError, RuntimeError) as exc:
        message = " ".join(str(exc).split())
        tokenize = values["tokenize"]
        raise UsageError(f"bleu: tokenize={tokenize} is not available: {message}") from exc



def _outputs(result: BLEUScore) -> list[float]:
    """Values in output order: headline, sentence, bp, ratio, p1..p4."""
    score = float(result.score)
    return [score, score, float(result.bp), float(result.ratio),
            *(float(p) for p in result.precisions)]


def _details(stats: Stats, result: BLEUScore, nrefs: int) -> dict[str, Any]:
    return {
        "counts": [int(c) for c in stats[2 : 2 + MAX_ORDER]],
        "totals": [int(t) for t in stats[2 + MAX_ORDER :]],
        "sys_len": int(stats[0]),
        "ref_len": int(stats[1]),
        "nrefs": nrefs,
        "precisions": [float(p) for p in result.precisions],
        "bp": float(result.bp),
        "ratio": float(result.ratio),
    }


def _nrefs_label(details: Sequence[Mapping[str, Any] | None]) -> str:
    counts = {int(d["nrefs"]) for d in details if d is not None}
    if not counts:
        return UNKNOWN_NREFS
    return str(counts.pop()) if len(counts) == 1 else "var"


# The statistics matrix of a result without ``stats`` (one built from details), built once
# and reused by every bootstrap resample.
_MATRICES: dict[int, tuple[weakref.ref[MetricResult], np.ndarray]] = {}


# The statistics of a result by column, as float64, for the resamples of its bootstrap.
_COLUMNS: dict[int, tuple[weakref.ref[MetricResult], np.ndarray]] = {}


def stats_columns(result: MetricResult, matrix: np.ndarray) -> np.ndarray:
    key = id(result)
    cached = _COLUMNS.get(key)
    if cached is not None and cached[0]() is result:
        return cached[1]
    columns = np.ascontiguousarray(matrix.T, dtype=np.float64)
    _COLUMNS[key] = (weakref.ref(result, lambda _ref: _COLUMNS.pop(key, None)), columns)
    return columns


def stats_matrix(result: MetricResult) -> np.ndarray:
    if result.stats is not None:  # kept by score() (and by a streamed run's summary)
        return result.stats[:, :STATS_WIDTH]
    key = id(result)
    cached = _MATRICES.get(key)
    if cached is not None and cached[0]() is result:
        return cached[1]
    details = result.details or []
    width = 2 + 2 * MAX_ORDER
    matrix = np.zeros((len(details), width), dtype=np.int64)
    for i, detail in enumerate(details):
        if detail is not None:
            matrix[i] = stats_row(detail)
    _MATRICES[key] = (weakref.ref(result, lambda _ref: _MATRICES.pop(key, None)), matrix)
    return matrix


def stats_row(detail: Mapping[str, Any]) -> Stats:
    """A record's statistics back in sacrebleu's layout."""
    return [int(detail["sys_len"]), int(detail["ref_len"]),
            *(int(c) for c in detail["counts"]), *(int(t) for t in detail["totals"])]
