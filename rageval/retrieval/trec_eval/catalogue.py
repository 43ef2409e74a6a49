"""trec_eval's measures: names, kinds, defaults and how each is computed, and the nicknames.

The names, nicknames (``official``, ``set``, ``all_trec``), default parameters and output order
are trec_eval 10.0's. Every per-query value comes from :mod:`rageval.retrieval.kernels`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rageval.core.errors import UsageError
from rageval.retrieval import kernels as K
from rageval.retrieval.kernels.interpolated import recall_cutoffs
from rageval.retrieval.ranking import Ranking

Kind = Literal["runid", "num_q", "long", "double", "gm", "cut_long", "cut_double", "p_double",
               "p_pair", "relstring"]

_LONG_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_RPREC_MULTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


@dataclass(frozen=True)
class MeasureContext:
    """Evaluation settings a measure may depend on."""

    rel_level: int
    num_docs: int


Compute = Callable[[Ranking, MeasureContext, tuple], np.ndarray]


@dataclass(frozen=True)
class Measure:
    """One trec_eval measure: how to compute, name, average and print it."""

    name: str
    kind: Kind
    doc: str
    compute: Compute | None = None
    default: tuple = ()
    # Computed once per judgment group of a topic and averaged over them: only from -R qrels_jg
    # files, which in turn serve no other measure (besides runid and num_q).
    groups: bool = False


def _cut_each(fn: Callable[[Ranking, int, int], np.ndarray]) -> Compute:
    def compute(r: Ranking, ctx: MeasureContext, cuts: tuple) -> np.ndarray:
        return np.stack([fn(r, int(k), ctx.rel_level) for k in cuts], axis=1)

    return compute


def _gains(pairs: tuple) -> dict[int, float]:
    """``level=gain`` parameters whose level is an integer (others, like ``p``, are ignored)."""
    out: dict[int, float] = {}
    for name, value in pairs:
        if re.fullmatch(r"[+-]?[0-9]+", name) and int(name) not in out:
            out[int(name)] = value
    return out


def _pair(pairs: tuple, key: str, default: float) -> float:
    value = default
    for name, v in pairs:
        if name == key:
            value = v
    return value


def _utility(r: Ranking, ctx: MeasureContext, params: tuple) -> np.ndarray:
    if len(params) != 4:
        raise UsageError("utility needs exactly 4 coefficients (-m utility.a,b,c,d)")
    return K.utility(r, params, ctx.num_docs, ctx.rel_level)


# What glibc prints as "-nan": x86's 0.0 / 0.0.
_ZERO_BY_ZERO = float(np.copysign(np.nan, -1.0))


def _nothing_retrieved(r: Ranking, ctx: MeasureContext, levels: tuple) -> np.ndarray:
    """bool ``[nq, levels]``: the values trec_eval computes as 0 / 0 retrieved documents.

    Its interpolated precision starts from num_rel_ret / num_ret; a topic that retrieved
    nothing (every result unjudged under -J, or -M 0) keeps that NaN at each level whose
    cutoff, lround(level * num_rel), is 0. (A topic -c adds has retrieved its stand-in.)
    """
    empty = K.num_ret(r) == 0
    cuts = [recall_cutoffs(r, level, ctx.rel_level) <= 0 for level in levels]
    return empty[:, None] & np.stack(cuts, axis=1) if cuts else np.zeros((r.num_queries, 0), bool)


def _iprec(r: Ranking, ctx: MeasureContext, levels: tuple) -> np.ndarray:
    values = K.interpolated_precision_at_recall(r, levels, ctx.rel_level)
    values[_nothing_retrieved(r, ctx, levels)] = _ZERO_BY_ZERO
    return values


def _eleven_point(r: Ranking, ctx: MeasureContext, levels: tuple) -> np.ndarray:
    values = K.eleven_point_average(r, levels, ctx.rel_level)
    values[_nothing_retrieved(r, ctx, levels).any(axis=1)] = _ZERO_BY_ZERO
    return values


def _ndcg(r: Ranking, ctx: MeasureContext, pairs: tuple) -> np.ndarray:
    dcg, ideal = K.trec_dcg(r, _gains(pairs))
    return np.where(ideal > 0.0, K._safe_div(dcg, ideal), 0.0)


MEASURES: tuple[Measure, ...] = (
    Measure("runid", "runid", "Run name (runid field of the run's last line)."),
    Measure("num_q", "num_q", "Number of topics averaged over (with -c: topics of the qrels)."),
    Measure("num_ret", "long", "Retrieved documents (after -M); summary is the sum.",
            lambda r, c, p: K.num_ret(r)),
    Measure("num_rel", "long", "Relevant documents (grade >= -l); summary is the sum.",
            lambda r, c, p: K.num_rel(r, c.rel_level)),
    Measure("num_rel_ret", "long", "Relevant retrieved documents; summary is the sum.",
            lambda r, c, p: K.num_rel_ret(r, c.rel_level)),
    Measure("map", "double", "Mean average precision.",
            lambda r, c, p: K.average_precision(r, c.rel_level)),
    Measure("gm_map", "gm", "Average precision, geometric mean over topics (summary only).",
            lambda r, c, p: K.average_precision(r, c.rel_level)),
    Measure("Rprec", "double", "Precision after num_rel documents.",
            lambda r, c, p: K.r_precision(r, c.rel_level)),
    Measure("bpref", "double", "Binary preference (judged documents only).",
            lambda r, c, p: K.bpref(r, c.rel_level)),
    Measure("recip_rank", "double", "Reciprocal rank of the first relevant document.",
            lambda r, c, p: K.reciprocal_rank(r, c.rel_level)),
    Measure("iprec_at_recall", "cut_double", "Interpolated precision at recall levels.",
            _iprec, _RECALL_LEVELS),
    Measure("P", "cut_long", "Precision at cutoffs.", _cut_each(K.precision_at), _LONG_CUTS),
    Measure("relstring", "relstring", "Relevance values of the first N documents (per topic).",
            None, (10.0,)),
    Measure("recall", "cut_long", "Recall at cutoffs.", _cut_each(K.recall_at), _LONG_CUTS),
    Measure("infAP", "double", "Inferred average precision (sampled pools).",
            lambda r, c, p: K.infap(r, c.rel_level)),
    Measure("gm_bpref", "gm", "bpref, geometric mean over topics (summary only).",
            lambda r, c, p: K.bpref(r, c.rel_level)),
    Measure("Rprec_mult", "cut_double", "Precision at multiples of num_rel.",
            lambda r, c, p: np.stack([K.r_precision_mult(r, x, c.rel_level) for x in p], axis=1),
            _RPREC_MULTS),
    Measure("utility", "p_double", "Set utility a*relret + b*nonrelret + c*relmissed + d*rest.",
            _utility, (1.0, -1.0, 0.0, 0.0)),
    Measure("11pt_avg", "p_double", "Interpolated precision averaged over recall levels.",
            _eleven_point, _RECALL_LEVELS),
    Measure("binG", "double", "Binary G (experimental).",
            lambda r, c, p: K.bin_g(r, c.rel_level)),
    Measure("G", "p_pair", "Normalized gain G (experimental).",
            lambda r, c, p: K.g_measure(r, _gains(p))),
    Measure("dcg", "p_pair", "Discounted cumulative gain.",
            lambda r, c, p: K.trec_dcg(r, _gains(p))[0]),
    Measure("ideal_dcg", "p_pair", "Ideal discounted cumulative gain.",
            lambda r, c, p: K.trec_dcg(r, _gains(p))[1]),
    Measure("ndcg", "p_pair", "Normalized DCG (gains default to the grades).", _ndcg),
    Measure("ndcg_rel", "p_pair", "nDCG averaged over relevant documents (experimental).",
            lambda r, c, p: K.ndcg_rel(r, _gains(p))),
    Measure("Rndcg", "p_pair", "nDCG averaged at R-levels (experimental).",
            lambda r, c, p: K.rndcg(r, _gains(p), c.rel_level)),
    Measure("ndcg_cut", "cut_long", "nDCG at cutoffs.",
            lambda r, c, p: np.stack([K.ndcg_at(r, int(k)) for k in p], axis=1), _LONG_CUTS),
    Measure("map_cut", "cut_long", "Average precision at cutoffs.",
            lambda r, c, p: np.stack(
                [K.average_precision(r, c.rel_level, int(k)) for k in p], axis=1),
            _LONG_CUTS),
    Measure("relative_P", "cut_long", "Precision at cutoffs relative to the best possible.",
            _cut_each(K.relative_precision_at), _LONG_CUTS),
    Measure("success", "cut_long", "A relevant document within the cutoff.",
            _cut_each(K.success_at), (1, 5, 10)),
    Measure("set_P", "double", "Precision of the retrieved set.",
            lambda r, c, p: K.set_precision(r, c.rel_level)),
    Measure("set_relative_P", "double", "Set precision relative to the best possible.",
            lambda r, c, p: K.set_relative_precision(r, c.rel_level)),
    Measure("set_recall", "double", "Recall of the retrieved set.",
            lambda r, c, p: K.set_recall(r, c.rel_level)),
    Measure("set_map", "double", "Set precision times set recall.",
            lambda r, c, p: K.set_map(r, c.rel_level)),
    Measure("set_F", "p_double", "Set F measure (x+1)PR/(xP+R), default x = 1.",
            lambda r, c, p: K.set_f(r, p[0], c.rel_level), (1.0,)),
    Measure("num_nonrel_judged_ret", "long", "Judged non-relevant retrieved documents (sum).",
            lambda r, c, p: K.num_nonrel_judged_ret(r, c.rel_level)),
    Measure("map_avgjg", "double", "map averaged over the judgment groups (-R qrels_jg).",
            lambda r, c, p: K.average_precision(r, c.rel_level), groups=True),
    Measure("P_avgjg", "cut_long", "P at cutoffs averaged over the judgment groups.",
            _cut_each(K.precision_at), _LONG_CUTS, groups=True),
    Measure("Rprec_mult_avgjg", "cut_double", "Rprec_mult averaged over the judgment groups.",
            lambda r, c, p: np.stack([K.r_precision_mult(r, x, c.rel_level) for x in p], axis=1),
            _RPREC_MULTS, groups=True),
    Measure("yaap", "double", "Yet another average precision (Robertson).",
            lambda r, c, p: K.yaap(r, c.rel_level)),
    Measure("rbp", "p_pair", "Rank-biased precision (default p=0.9).",
            lambda r, c, p: K.rbp(r, _pair(p, "p", 0.9), _gains(p))),
    Measure("rbp_resid", "p_pair", "Residual of rank-biased precision.",
            lambda r, c, p: K.rbp_residual(r, _pair(p, "p", 0.9))),
    Measure("unj", "cut_long", "Fraction of unjudged documents at cutoffs.",
            lambda r, c, p: np.stack([K.unjudged_at(r, int(k)) for k in p], axis=1), (5, 10, 20)),
)

# trec_eval measures of preference judgments (-R prefs, -R qrels_prefs), which rageval does
# not read.
UNSUPPORTED = {
    "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp",
    "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
    "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp",
    "prefs_avgjg_imp",
}

NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P",
            "set_recall", "set_relative_P", "set_map", "set_F"),
    "all_trec": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P", "relstring",
                 "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility",
                 "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut",
                 "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall",
                 "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret"),
    "qrels_jg": ("runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg"),
}
UNSUPPORTED_NICKNAMES = {"all_prefs", "prefs"}
