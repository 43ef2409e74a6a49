"""The exact line-by-line TREC parser: the readers' fallback, and their error reporting.

Fields are split on C's whitespace exactly as trec_eval splits them; a malformed line raises
:class:`~rageval.core.errors.InputError` with its 1-based line number and field.
:func:`locate_line` finds the line of an error detected after a columnar read.

With ``like_trec_eval`` the parser reads what trec_eval 10.0 reads, no more and no less: numbers
as C's atof/atol read them (the number a field starts with; 0 if none, with a warning), and
qrels lines as its qrels reader takes them (a blank line is an error; a ``#`` line is a comment
only in column 0 and only when the line before was not one).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import polars as pl

from rageval.core.errors import InputError, InputWarning
from rageval.retrieval.trec.syntax import FLOAT_RE, INT_RE, RUN_COLUMNS, c_atof, c_atol


def _data_lines(path: str) -> Iterator[tuple[int, list[bytes]]]:
    """(1-based line number, fields) for every non-blank, non-comment line."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            fields = raw.split()  # bytes.split() splits on exactly C's isspace() set
            if not fields or fields[0].startswith(b"#"):
                continue
            yield lineno, fields


def _qrels_lines_10(path: str) -> Iterator[tuple[int, list[bytes]]]:
    """The qrels lines trec_eval 10.0 parses. Its reader skips a line starting with '#' and
    then parses the next line whatever it holds, so of two comment lines in a row the second
    is read as a judgment; a blank line is malformed. (A comment as the last line makes
    trec_eval 10.0 read past its buffer and crash; it is skipped here.)"""
    after_comment = False
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if raw.startswith(b"#") and not after_comment:
                after_comment = True
                continue
            after_comment = False
            fields = raw.split()
            if not fields:
                raise InputError("blank line: trec_eval 10.0 stops at it ('Malformed line'); "
                                 "remove it", path=path, line=lineno)
            yield lineno, fields


class _Loose:
    """Fields read as C reads numbers that are not entirely numbers: one warning per file,
    with a count and the first few."""

    def __init__(self, path: str, what: str, how: str) -> None:
        self.path, self.what, self.how = path, what, how
        self.count = 0
        self.first: list[str] = []

    def add(self, lineno: int, token: bytes, value: float) -> None:
        self.count += 1
        if len(self.first) < 3:
            shown = int(value) if float(value).is_integer() else value
            self.first.append(f"line {lineno}: {_text(token)!r} read as {shown}")

    def warn(self) -> None:
        if self.count:
            more = f" and {self.count - len(self.first)} more" if self.count > 3 else ""
            warnings.warn(InputWarning(
                f"{self.path}: {self.count} {self.what} not entirely a number, read as C's "
                f"{self.how} reads it, as trec_eval does ({'; '.join(self.first)}{more})"),
                stacklevel=4)


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def exact_qrels(path: str, like_trec_eval: bool = False, groups: bool = False) -> pl.DataFrame:
    """The judgments of a qrels file; with ``groups``, of a trec_eval ``qrels_jg`` file, whose
    second field names the judgment group (kept as a ``jg`` column)."""
    qids: list[str] = []
    jgs: list[str] = []
    docnos: list[str] = []
    rels: list[int] = []
    loose = _Loose(path, "grade(s)", "atol")
    lines = _qrels_lines_10(path) if like_trec_eval else _data_lines(path)
    for lineno, fields in lines:
        if len(fields) != 4:
            hint = (" (trec_eval 10.0 reads a '#' line right after a comment line, or one that "
                    "does not start in column 0, as a judgment)"
                    if like_trec_eval and fields[0].startswith(b"#") else "")
            layout = "qid jg docno rel" if groups else "qid iter docno rel"
            raise InputError(
                f"expected 4 fields '{layout}', found {len(fields)}{hint}",
                path=path,
                line=lineno,
            )
        qids.append(_text(fields[0]))
        jgs.append(_text(fields[1]))
        docnos.append(_text(fields[2]))
        rels.append(_grade(fields[3], like_trec_eval, loose, path, lineno))
    loose.warn()
    columns = {"qid": qids, "jg": jgs, "docno": docnos, "rel": rels}
    if not groups:
        del columns["jg"]
    return pl.DataFrame(columns, schema={name: pl.Int64 if name == "rel" else pl.String
                                         for name in columns})


def _grade(token: bytes, like_trec_eval: bool, loose: _Loose, path: str, lineno: int) -> int:
    if like_trec_eval:
        value, whole = c_atol(token)
        if not whole:
            loose.add(lineno, token, value)
        return value
    if not INT_RE.fullmatch(token):
        raise InputError(f"relevance grade must be an integer, got {_text(token)!r}",
                         path=path, line=lineno, field="rel")
    return int(token)


def exact_run(path: str, like_trec_eval: bool = False) -> tuple[pl.DataFrame, str]:
    qids: list[str] = []
    docnos: list[str] = []
    scores: list[float] = []
    runid = ""
    loose = _Loose(path, "score(s)", "atof")
    for lineno, fields in _data_lines(path):
        if len(fields) < 6:
            missing = RUN_COLUMNS[len(fields)]
            raise InputError(
                f"expected 6 fields 'qid Q0 docno rank score runid', found {len(fields)}",
                path=path,
                line=lineno,
                field=missing,
            )
        qids.append(_text(fields[0]))
        docnos.append(_text(fields[2]))
        scores.append(_score(fields[4], like_trec_eval, loose, path, lineno))
        runid = _text(fields[5])
    loose.warn()
    frame = pl.DataFrame(
        {"qid": qids, "docno": docnos, "score": scores},
        schema={"qid": pl.Categorical(), "docno": pl.String, "score": pl.Float64},
    )
    return frame, runid


def _score(token: bytes, like_trec_eval: bool, loose: _Loose, path: str, lineno: int) -> float:
    if like_trec_eval:
        value, whole = c_atof(token)
        if not whole and value == value:
            loose.add(lineno, token, value)
    elif FLOAT_RE.fullmatch(token):
        value = float(token)
    else:
        raise InputError(f"score must be a number, got {_text(token)!r}",
                         path=path, line=lineno, field="score")
    if value != value:
        # trec_eval's sort compares NaN as neither above nor below any score: where it lands
        # depends on the C library's qsort, so no order can be promised.
        raise InputError(f"score {_text(token)!r} is not a number (NaN): results with NaN "
                         "scores have no defined order", path=path, line=lineno, field="score")
    return value


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
