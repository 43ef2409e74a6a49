"""The exact line-by-line TREC parser: the readers' fallback, and their error reporting.

Fields are split on C's whitespace exactly as trec_eval splits them; a malformed line raises
:class:`~rageval.core.errors.InputError` with its 1-based line number and field.
:func:`locate_line` finds the line of an error detected after a columnar read.
"""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from rageval.core.errors import InputError
from rageval.retrieval.trec.syntax import FLOAT_RE, INT_RE, RUN_COLUMNS


def _data_lines(path: str) -> Iterator[tuple[int, list[bytes]]]:
    """(1-based line number, fields) for every non-blank, non-comment line."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            fields = raw.split()  # bytes.split() splits on exactly C's isspace() set
            if not fields or fields[0].startswith(b"#"):
                continue
            yield lineno, fields


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def exact_qrels(path: str) -> pl.DataFrame:
    qids: list[str] = []
    docnos: list[str] = []
    rels: list[int] = []
    for lineno, fields in _data_lines(path):
        if len(fields) != 4:
            raise InputError(
                f"expected 4 fields 'qid iter docno rel', found {len(fields)}",
                path=path,
                line=lineno,
            )
        rel = fields[3]
        if not INT_RE.fullmatch(rel):
            raise InputError(
                f"relevance grade must be an integer, got {_text(rel)!r}",
                path=path,
                line=lineno,
                field="rel",
            )
        qids.append(_text(fields[0]))
        docnos.append(_text(fields[2]))
        rels.append(int(rel))
    return pl.DataFrame(
        {"qid": qids, "docno": docnos, "rel": rels},
        schema={"qid": pl.String, "docno": pl.String, "rel": pl.Int64},
    )


def exact_run(path: str) -> tuple[pl.DataFrame, str]:
    qids: list[str] = []
    docnos: list[str] = []
    scores: list[float] = []
    runid = ""
    for lineno, fields in _data_lines(path):
        if len(fields) < 6:
            missing = RUN_COLUMNS[len(fields)]
            raise InputError(
                f"expected 6 fields 'qid Q0 docno rank score runid', found {len(fields)}",
                path=path,
                line=lineno,
                field=missing,
            )
        score = fields[4]
        if not FLOAT_RE.fullmatch(score):
            raise InputError(
                f"score must be a number, got {_text(score)!r}",
                path=path,
                line=lineno,
                field="score",
            )
        value = float(score)
        if value != value:
            raise InputError("score is NaN", path=path, line=lineno, field="score")
        qids.append(_text(fields[0]))
        docnos.append(_text(fields[2]))
        scores.append(value)
        runid = _text(fields[5])
    frame = pl.DataFrame(
        {"qid": qids, "docno": docnos, "score": scores},
        schema={"qid": pl.Categorical(), "docno": pl.String, "score": pl.Float64},
    )
    return frame, runid


def locate_line(path: str, qid: str, docno: str, occurrence: int = 2) -> int | None:
    """Line number of the ``occurrence``-th data line with this (qid, docno), if any.

    Used to point error messages (duplicate documents, ...) at a line after a columnar read.
    """
    want_q, want_d = qid.encode(), docno.encode()
    seen = 0
    for lineno, fields in _data_lines(path):
        if len(fields) >= 3 and fields[0] == want_q and fields[2] == want_d:
            seen += 1
            if seen == occurrence:
                return lineno
    return None
