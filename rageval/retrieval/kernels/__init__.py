"""Vectorised retrieval-metric kernels over a :class:`~rageval.retrieval.ranking.Ranking`.

Every kernel takes a ranking and returns one float64 value per query (``[nq]``, or
``[nq, K]`` for the multi-cutoff ones), following trec_eval 10.0's definitions and edge cases
bit for bit: the same floating-point operations in the same order (sums are accumulated
sequentially in rank order, ``log2`` comes from the C library), so values print identically
to trec_eval's. A value trec_eval reports as 0 (e.g. recall of a query without relevant
documents) is 0 here.

Relevance conventions (trec_eval's). Each retrieved document carries a *relevance value*:
its grade when judged with a grade >= 0, ``-1`` when it is not in the query's judgments
("not pooled") and ``-2`` when it is judged with a negative grade ("pooled but unjudged",
used by infAP). A document is *relevant* when that value is ``>= rel_level``; ``num_rel`` is
the number of judgments with grade ``>= max(rel_level, 0)``. Graded measures (the nDCG family,
ERR, RBP) use the grade itself as gain, and a negative value gives no gain.

The docstring of each kernel is its metric card: formula, parameters, edge cases.

- :mod:`~.counts`: num_ret, num_rel, num_rel_ret; precision, recall, success and unj at a
  cutoff, R-precision, F1@k; the set measures and utility;
- :mod:`~.ranks`: AP (map, map_cut), yaap, first relevant rank and reciprocal rank, bpref, infAP;
- :mod:`~.interpolated`: interpolated precision at recall levels, 11pt_avg;
- :mod:`~.gains`: DCG and nDCG, trec_eval's dcg / ndcg_rel / Rndcg, G and binG;
- :mod:`~.user_models`: RBP and its residual, ERR;
- :mod:`~.auc`: ROC AUC of the retrieval scores;
- :mod:`~.relstring`: the relevance values of the top ranks as a string;
- :mod:`~.segments`: what they share: row subsets per query, sequential scans and sums, libm
  log2 and power tables.
"""

from rageval.retrieval.kernels.auc import roc_auc
from rageval.retrieval.kernels.counts import (
    f1_at,
    hit_at,
    num_nonrel_judged_ret,
    num_rel,
    num_rel_ret,
    num_ret,
    precision_at,
    r_precision,
    r_precision_mult,
    recall_at,
    relative_precision_at,
    set_f,
    set_map,
    set_precision,
    set_recall,
    set_relative_precision,
    success_at,
    unjudged_at,
    utility,
)
from rageval.retrieval.kernels.gains import (
    Gain,
    bin_g,
    dcg_at,
    g_measure,
    ideal_dcg_at,
    ndcg_at,
    ndcg_rel,
    rndcg,
    trec_dcg,
)
from rageval.retrieval.kernels.interpolated import (
    eleven_point_average,
    interpolated_precision_at_recall,
)
from rageval.retrieval.kernels.ranks import (
    INFAP_EPSILON,
    MIN_GEO_MEAN,
    average_precision,
    bpref,
    first_relevant_rank,
    infap,
    reciprocal_rank,
    yaap,
)
from rageval.retrieval.kernels.relstring import relstring

# trec_eval's ndcg measure divides with it (``K._safe_div``).
from rageval.retrieval.kernels.segments import _safe_div as _safe_div
from rageval.retrieval.kernels.user_models import err_at, rbp, rbp_residual

__all__ = [
    "INFAP_EPSILON",
    "MIN_GEO_MEAN",
    "Gain",
    "average_precision",
    "bin_g",
    "bpref",
    "dcg_at",
    "eleven_point_average",
    "err_at",
    "f1_at",
    "first_relevant_rank",
    "g_measure",
    "hit_at",
    "ideal_dcg_at",
    "infap",
    "interpolated_precision_at_recall",
    "ndcg_at",
    "ndcg_rel",
    "num_nonrel_judged_ret",
    "num_rel",
    "num_rel_ret",
    "num_ret",
    "precision_at",
    "r_precision",
    "r_precision_mult",
    "rbp",
    "rbp_residual",
    "recall_at",
    "reciprocal_rank",
    "relative_precision_at",
    "relstring",
    "rndcg",
    "roc_auc",
    "set_f",
    "set_map",
    "set_precision",
    "set_recall",
    "set_relative_precision",
    "success_at",
    "trec_dcg",
    "unjudged_at",
    "utility",
    "yaap",
]
