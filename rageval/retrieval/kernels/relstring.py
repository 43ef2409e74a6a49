"""relstring: the relevance values of the top ranks as a string (a trec_eval diagnostic)."""

from __future__ import annotations

from rageval.retrieval.ranking import TE_NONPOOL, TE_UNJUDGED, Ranking


def relstring(r: Ranking, length: int = 10) -> list[str]:
    """relstring.N: the relevance values of the first N retrieved documents as a string: the
    digit for 0-9, '>' above 9, '-' not pooled, '.' pooled but unjudged, '<' other negatives."""
    te = r.te_rel()
    out: list[str] = []
    for q in range(r.num_queries):
        lo = int(r.offsets[q])
        hi = min(int(r.offsets[q + 1]), lo + max(length, 0))
        chars = []
        for v in te[lo:hi].tolist():
            if v > 9:
                chars.append(">")
            elif v >= 0:
                chars.append(chr(ord("0") + v))
            elif v == TE_NONPOOL:
                chars.append("-")
            elif v == TE_UNJUDGED:
                chars.append(".")
            else:
                chars.append("<")
        out.append("".join(chars))
    return out
