"""Conventions shared by the ranking's modules: grade codes and CSR offsets.

Also :func:`fast_allocation`, under which big rankings are built and evaluated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

# Grade stored for a retrieved document that is not in the query's judgments (trec_eval's
# RELVALUE_NONPOOL). Documents judged with a negative grade keep that grade in ``grades`` and
# are told apart by the private ``_pooled`` mask (trec_eval's RELVALUE_UNJUDGED).
NOT_JUDGED = -1
TE_NONPOOL = -1
TE_UNJUDGED = -2


@contextmanager
def fast_allocation() -> Iterator[None]:
    """Turn off numpy's hugepage advice on big arrays for the duration of the block.

    With transparent hugepages in ``madvise`` mode and defrag on ``madvise`` (a common Linux
    default), every fresh large numpy array triggers synchronous memory compaction: first
    touching 80 MB then takes ~0.2 s instead of ~0.03 s. Evaluating a 10M-line run allocates
    several such arrays, so this roughly halves the time spent outside parsing.
    """
    setter = getattr(np._core.multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)


def offsets_from_counts(counts: np.ndarray) -> np.ndarray:
    """int64 ``[len(counts) + 1]``: CSR offsets of segments of the given sizes."""
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def segment_ids_of(offsets: np.ndarray) -> np.ndarray:
    """intp ``[offsets[-1]]``: the segment index of each row of a CSR layout."""
    counts = np.diff(offsets)
    return np.repeat(np.arange(counts.size, dtype=np.intp), counts)
