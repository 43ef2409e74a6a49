"""The grade of every ranked document of a TREC run, and trec_eval's duplicate checks.

Run documents are matched to the qrels by a 64-bit hash of the docno salted with the query
(:func:`salted_keys`), and the matches are checked on the strings (:func:`lookup_grades`).
trec_eval refuses a document judged twice for an evaluated query (:func:`check_qrels_unique`)
or retrieved twice for a query (:func:`check_run_unique`); the same hashes find those cheaply.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from rageval.core.errors import InputError
from rageval.retrieval.ranking.arrays import NOT_JUDGED
from rageval.retrieval.ranking.trec_order import Layout, Segments
from rageval.retrieval.trec import Qrels, Run, locate_line

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# A Qrels whose cache holds True under this key judges no document twice for a topic (its
# reader checked them all at once): check_qrels_unique has nothing to do.
UNIQUE_JUDGMENTS = "unique_judgments"


def salted_keys(hashes: np.ndarray, codes: np.ndarray, nq: int) -> np.ndarray:
    """64-bit key of (query code, docno hash): the hash XOR a per-query salt."""
    with np.errstate(over="ignore"):
        salt = np.arange(1, nq + 1, dtype=np.uint64) * _GOLDEN
    return hashes ^ salt[codes]


def all_distinct(keys: np.ndarray) -> bool:
    """Whether no value repeats: sorted and compared with the next (numpy's unique, hash-based
    for such keys, takes about fifteen times as long)."""
    ordered = np.sort(keys)
    return not bool(np.any(ordered[1:] == ordered[:-1]))


def lookup_grades(
    hashes: np.ndarray,
    layout: Layout,
    segs: Segments,
    docno: pl.Series,
    q_hash: np.ndarray,
    q_codes: np.ndarray,
    q_docno: pl.Series,
    q_rel: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Grade of every ranked row (-1 when not judged) and whether it is judged.

    A hash join: a bitmap indexed by the top bits of the judged documents' hashes keeps the
    few candidate file rows; those are matched exactly by (query, hash) key and then checked
    on the docno strings.
    """
    n = int(layout.offsets[-1])
    grades = np.empty(n, dtype=np.int64)
    pooled = np.zeros(n, dtype=bool)
    if n == 0 or q_hash.size == 0:
        grades.fill(NOT_JUDGED)
        return grades, pooled
    nq = layout.offsets.size - 1
    # Two bitmaps on independent bits of the hash: few rows survive both.
    bits = max(16, min(24, int(q_hash.size * 16).bit_length()))
    shift = np.uint64(64 - bits)
    mask = np.uint64((1 << bits) - 1)
    table = np.zeros(1 << bits, dtype=bool)
    table[(q_hash >> shift).view(np.int64)] = True
    second = np.zeros(1 << bits, dtype=bool)
    second[(q_hash & mask).view(np.int64)] = True
    # The grades buffer doubles as scratch for the bitmap index (fresh memory is slow).
    top = grades.view(np.uint64) if hashes.size == n else np.empty(hashes.size, np.uint64)
    np.right_shift(hashes, shift, out=top)
    cand = np.flatnonzero(table[top.view(np.int64)])
    del top
    grades.fill(NOT_JUDGED)
    cand = cand[second[(hashes[cand] & mask).view(np.int64)]]
    if cand.size == 0:
        return grades, pooled
    if layout.order is None:
        where = layout.ranked(cand)
    else:  # invert the permutation for the candidates only (a full inverse is 8 bytes a row)
        flag = np.zeros(hashes.size, dtype=bool)
        flag[cand] = True
        ranked_rows = np.flatnonzero(flag[layout.order])
        del flag
        file_rows = layout.order[ranked_rows]
        where = np.full(cand.size, -1, dtype=np.int64)
        where[np.searchsorted(cand, file_rows)] = ranked_rows
    ranked = where >= 0
    cand, where = cand[ranked], where[ranked]
    codes = segs.codes_of(cand)
    keys = salted_keys(hashes[cand], codes, nq)
    q_keys = salted_keys(q_hash, q_codes, nq)
    sort_q = np.argsort(q_keys, kind="stable")
    sorted_keys = q_keys[sort_q]
    by_key = np.argsort(keys)  # sorted needles make the binary searches cache-friendly
    at = np.empty(keys.size, dtype=np.int64)
    at[by_key] = np.searchsorted(sorted_keys, keys[by_key])
    np.minimum(at, sorted_keys.size - 1, out=at)
    hit = sorted_keys[at] == keys
    found, where = cand[hit], where[hit]
    judg = sort_q[at[hit]]
    # (Indexing gathers directly; Series.gather goes through a query: several times slower.)
    same = (q_codes[judg] == codes[hit]) & (docno[found] == q_docno[judg]).to_numpy()
    if not same.all():  # a 64-bit hash collision: join on the strings instead
        return _exact_lookup(layout, segs, docno, q_codes, q_docno, q_rel)
    grades[where] = q_rel[judg]
    pooled[where] = True
    return grades, pooled


def _exact_lookup(
    layout: Layout,
    segs: Segments,
    docno: pl.Series,
    q_codes: np.ndarray,
    q_docno: pl.Series,
    q_rel: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    n = int(layout.offsets[-1])
    src = layout.source(np.arange(n, dtype=np.int64))
    left = pl.DataFrame({"c": segs.codes_of(src), "d": docno.gather(src)}).with_row_index("i")
    right = pl.DataFrame({"c": q_codes, "d": q_docno, "g": q_rel})
    joined = left.join(right, on=["c", "d"], how="inner")
    rows = joined.get_column("i").to_numpy()
    grades = np.full(n, NOT_JUDGED, dtype=np.int64)
    pooled = np.zeros(n, dtype=bool)
    grades[rows] = joined.get_column("g").to_numpy()
    pooled[rows] = True
    return grades, pooled


class DuplicateDocument(InputError):
    """A run lists, or a qrels judges, a document twice for a query (``qid``): trec_eval
    refuses both."""

    def __init__(self, message: str, *, qid: str, path: str | None = None,
                 line: int | None = None) -> None:
        super().__init__(message, path=path, line=line)
        self.qid = qid


def check_qrels_unique(
    qrels: Qrels,
    q_keys: np.ndarray,
    q_codes: np.ndarray,
    q_docno: pl.Series,
    qids: list[str],
) -> None:
    """trec_eval refuses a document judged twice for an evaluated query; so do we."""
    if qrels._cache.get(UNIQUE_JUDGMENTS, False):
        return
    if all_distinct(q_keys):
        return
    frame = pl.DataFrame({"c": q_codes, "d": q_docno})
    dup = frame.filter(pl.struct("c", "d").is_duplicated())
    if dup.height == 0:
        return
    # The first query trec_eval would meet (it evaluates queries in strcmp order).
    code, name = min(zip(dup.get_column("c").to_list(), dup.get_column("d").to_list(),
                         strict=True), key=lambda row: qids[row[0]].encode())
    qid = qids[code]
    line = locate_line(qrels.path, qid, name) if qrels.path else None
    raise DuplicateDocument(
        f"document {name!r} is judged more than once for query {qid!r}",
        qid=qid,
        path=qrels.path,
        line=line,
    )


def check_run_unique(
    hashes: np.ndarray,
    layout: Layout,
    segs: Segments,
    docno: pl.Series,
    qids: Sequence[str],
    run: Run,
) -> None:
    """trec_eval refuses a run listing a document twice for a query; so do we.

    Each query's 32-bit hash fragments are sorted row-wise in a padded 2-D array (cheap), and
    only queries where two fragments collide are checked on the docno strings.
    """
    frag = hashes.astype(np.uint32)  # low 32 bits, a fresh array we may sort in place
    lens = np.diff(layout.offsets)
    if layout.order is None:
        assert layout.starts is not None
        values, starts = frag, layout.starts
    else:
        values, starts = frag[layout.order], layout.offsets[:-1]
    del frag
    by_start = np.argsort(starts, kind="stable")  # file order: whole rows, no gathering
    suspects = by_start[_segments_with_equal_values(values, starts[by_start], lens[by_start])]
    # The first query trec_eval would meet (it evaluates queries in strcmp order).
    for q in sorted(suspects.tolist(), key=lambda q: qids[q].encode()):
        rows = layout.source(np.arange(layout.offsets[q], layout.offsets[q + 1]))
        names = docno.gather(rows)
        dup = names.filter(names.is_duplicated())
        if dup.len():
            name = dup[0]
            line = locate_line(run.path, qids[q], name) if run.path else None
            raise DuplicateDocument(
                f"document {name!r} is retrieved more than once for query {qids[q]!r}",
                qid=qids[q],
                path=run.path,
                line=line,
            )


def _segments_with_equal_values(
    values: np.ndarray, starts: np.ndarray, lens: np.ndarray
) -> np.ndarray:
    """Indices of the segments (``values[starts[i]:starts[i] + lens[i]]``) holding some value
    twice: row-wise sorts of padded 2-D blocks, segments bucketed by length. ``values`` is
    scratch: it may be reordered within segments."""
    out: list[np.ndarray] = []
    for segs, width in _length_buckets(lens):
        cols = np.arange(width)
        for chunk in _chunks(segs, width):
            first = starts[chunk]
            clen = lens[chunk]
            if np.all(clen == width) and np.all(first == first[0] + np.arange(chunk.size) * width):
                # Whole rows of ``values``: sort them in place (the caller's scratch array).
                block = values[first[0] : first[0] + chunk.size * width].reshape(-1, width)
                block.sort(axis=1)
            else:
                # Pads get distinct values no real (32-bit) value can take.
                valid = cols[None, :] < clen[:, None]
                block = np.broadcast_to(
                    (np.uint64(1) << np.uint64(32)) + cols.astype(np.uint64), (chunk.size, width)
                ).copy()
                block[valid] = values[(first[:, None] + cols[None, :])[valid]]
                block.sort(axis=1)
            dup = (block[:, 1:] == block[:, :-1]).any(axis=1)
            out.append(chunk[dup])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.intp)


def _length_buckets(counts: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """Segments with >= 2 elements grouped so that padding wastes at most half the space."""
    segs = np.flatnonzero(counts >= 2)
    if segs.size == 0:
        return []
    lens = counts[segs]
    if lens.min() * 2 >= lens.max():
        return [(segs, int(lens.max()))]
    exp = np.frexp(lens.astype(np.float64))[1]  # lens in [2**(e-1), 2**e)
    buckets = []
    for e in np.unique(exp):
        sel = segs[exp == e]
        buckets.append((sel, int(counts[sel].max())))
    return buckets


def _chunks(segs: np.ndarray, width: int, budget: int = 1 << 22) -> list[np.ndarray]:
    per = max(1, budget // max(width, 1))
    return [segs[i : i + per] for i in range(0, segs.size, per)]
