"""trec_eval's ``-Z FILE``: each topic's values as z-scores against per-topic means.

The file has lines ``qid measure mean stddev`` (whitespace separated, numbers read as C's atof
reads them; no comments, no blank lines). A value becomes ``(value - mean) / stddev``; with a
stddev of 0 it becomes 0 if it equals the mean and -1000000 (trec_eval's missing value) if not,
as it does when the file has no line for the topic or the measure (``measure`` is the printed
name: ``map``, ``P_10``, ...). Summaries are then taken over the z-scores.

trec_eval looks lines up with a binary search that starts one entry past the end of the range it
searches: a measure sorting after every one listed for a topic is compared with the first entry
of the next topic, and matches it if the names are equal. rageval searches the same way. Past
the last entry of the file trec_eval reads memory outside its table (and crashes); rageval takes
the value as missing there.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from rageval.core.errors import InputError
from rageval.retrieval.trec.syntax import c_atof
from rageval.retrieval.trec_eval.per_topic import MeasureResult

# What trec_eval puts in place of a value it has no z-score for.
MISSING_ZSCORE = -1000000.0


class ZScoreFileError(InputError):
    """A z-score file trec_eval 10.0 cannot read: it returns -1 from main (exit status 255)."""

    exit_code = 255


@dataclass(frozen=True)
class ZScores:
    """The file's lines sorted by (qid, measure) in strcmp order, and where each qid starts."""

    qids: list[bytes]
    starts: list[int]  # first line of each qid; a final entry holds the number of lines
    names: list[bytes]
    means: list[float]
    stddevs: list[float]

    def convert(self, value: float, qid: str, name: str) -> float:
        q = _c_search(self.qids, 0, len(self.qids), qid.encode())
        if q is None:
            return MISSING_ZSCORE
        lo = self.starts[q]
        line = _c_search(self.names, lo, self.starts[q + 1] - lo, name.encode())
        if line is None:
            return MISSING_ZSCORE
        mean, stddev = self.means[line], self.stddevs[line]
        if stddev:
            return (value - mean) / stddev
        return 0.0 if value == mean else MISSING_ZSCORE


def _c_search(keys: list[bytes], lo: int, num: int, key: bytes) -> int | None:
    """trec_eval's binary search of ``key`` in ``keys[lo:lo + num]``, which starts with the
    end at ``num`` rather than ``num - 1`` and so may look at ``keys[lo + num]``."""
    start, end = 0, num
    while start <= end:
        current = (start + end) // 2
        if lo + current >= len(keys):
            return None  # trec_eval reads past its table here
        found = keys[lo + current]
        if key < found:
            end = current - 1
        elif key > found:
            start = current + 1
        else:
            return lo + current
    return None


def read_zscores(path: str) -> ZScores:
    """Read a ``-Z`` file; :class:`ZScoreFileError` where trec_eval cannot read it, and an
    :class:`InputError` for a (qid, measure) listed twice, whose line trec_eval picks by the
    C library's sort."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ZScoreFileError(f"cannot read z-score file: {exc.strerror}", path=path) from None
    if not data:
        raise ZScoreFileError("empty z-score file", path=path)
    rows = []
    for lineno, raw in enumerate(data.removesuffix(b"\n").split(b"\n"), start=1):
        fields = raw.split()
        if len(fields) != 4:
            raise ZScoreFileError(f"expected 4 fields 'qid measure mean stddev', found "
                                  f"{len(fields)}", path=path, line=lineno)
        rows.append((fields[0], fields[1], c_atof(fields[2])[0], c_atof(fields[3])[0]))
    rows.sort(key=lambda row: (row[0], row[1]))
    for a, b in itertools.pairwise(rows):
        if a[:2] == b[:2]:
            raise InputError(f"topic '{a[0].decode(errors='replace')}' measure "
                             f"'{a[1].decode(errors='replace')}' is listed twice", path=path)
    qids = sorted({row[0] for row in rows})
    starts = [0]
    for i in range(1, len(rows)):
        if rows[i][0] != rows[i - 1][0]:
            starts.append(i)
    starts.append(len(rows))
    return ZScores(qids, starts, [r[1] for r in rows], [r[2] for r in rows],
                   [r[3] for r in rows])


def to_zscores(results: list[MeasureResult], qids: tuple[str, ...], zscores: ZScores) -> None:
    """Replace every per-topic value by its z-score (before the summary, as trec_eval)."""
    for res in results:
        if not isinstance(res.per_query, np.ndarray):
            continue
        values = res.per_query
        for q, qid in enumerate(qids):
            for c, name in enumerate(res.selected.names):
                values[q, c] = zscores.convert(float(values[q, c]), qid, name)
