"""Readers and a writer for TREC qrels and run files.

Formats (fields separated by any run of ASCII whitespace, as trec_eval splits them):

* qrels: ``qid iter docno rel`` -- ``iter`` is ignored, ``rel`` is an integer grade (negative
  grades mean "in the pool but not judged", trec_eval's convention for sampled pools).
* run: ``qid Q0 docno rank score runid [ignored ...]`` -- the rank column is ignored (trec_eval
  re-ranks by score), the score is read as a float64, anything after ``runid`` is ignored and
  the run's name is the ``runid`` of its last line.

Lines whose first non-blank character is ``#`` are comments and blank lines are skipped in both
files. Any other malformed line raises :class:`rageval.core.errors.InputError` naming the file, the
1-based line and the field.

Reading is columnar (polars' CSV reader) so a 10M-line run parses in about a second. The fast
path handles the common layouts (single spaces, or single tabs with padded fields); any file it
cannot prove well-formed is re-read by an exact line-by-line parser, which is also where every
error message with a line number comes from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import polars as pl

from rageval.core.errors import InputError

__all__ = [
    "Qrels",
    "Run",
    "read_qrels",
    "read_run",
    "write_run",
]

PathLike = str | os.PathLike[str]

# C's isspace() in the "C" locale, which is what trec_eval splits fields on.
_WS = " \t\n\x0b\x0c\r"
_INT_RE = re.compile(rb"[+-]?[0-9]+")
_FLOAT_RE = re.compile(
    rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.IGNORECASE,
)

_RUN_COLUMNS = ("qid", "iter", "docno", "rank", "score", "runid")
_QRELS_COLUMNS = ("qid", "iter", "docno", "rel", "extra")  # "extra" must stay empty


@dataclass(frozen=True)
class Qrels:
    """Relevance judgments, one row per line of the file (file order).

    ``frame`` has the columns ``qid`` (String), ``docno`` (String) and ``rel`` (Int64).
    """

    frame: pl.DataFrame
    path: str | None = None

    def __len__(self) -> int:
        return self.frame.height

    def qids(self) -> list[str]:
        """Distinct query ids in trec_eval's order (byte-wise ``strcmp`` order)."""
        return sorted(self.frame.get_column("qid").unique().to_list())

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{qid: {docno: rel}}`` (a later line for the same pair wins)."""
        out: dict[str, dict[str, int]] = {}
        cols = self.frame.select("qid", "docno", "rel")
        for qid, docno, rel in zip(*(c.to_list() for c in cols.get_columns()), strict=True):
            out.setdefault(qid, {})[docno] = rel
        return out


@dataclass(frozen=True)
class Run:
    """A retrieval run, one row per result line (file order).

    ``frame`` has the columns ``qid`` (Categorical), ``docno`` (String) and ``score``
    (Float64). ``runid`` is the run name from the last line, as trec_eval reports it.
    """

    frame: pl.DataFrame
    runid: str
    path: str | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return self.frame.height

    def qid_layout(self) -> QidLayout:
        """Where each query's lines are (see :class:`QidLayout`). Cached."""
        if "qids" not in self._cache:
            self._cache["qids"] = _qid_layout(self.frame.get_column("qid"))
        out: QidLayout = self._cache["qids"]
        return out


@dataclass(frozen=True)
class QidLayout:
    """The query ids of a run's lines, in one of two forms.

    ``names`` are the distinct qids. When the lines come in few blocks of equal qids (a run
    written query by query), ``starts`` holds the first line (0-based data row) of each block
    and ``block_name`` its index into ``names``; otherwise ``row_name`` gives each line's
    index into ``names``.
    """

    names: list[str]
    starts: np.ndarray | None = None
    block_name: np.ndarray | None = None
    row_name: np.ndarray | None = None


def _qid_layout(qids: pl.Series) -> QidLayout:
    if qids.dtype != pl.Categorical:
        qids = qids.cast(pl.Categorical())
    n = qids.len()
    if n == 0:
        return QidLayout([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    phys = qids.to_physical()
    # Block starts, chunk by chunk on zero-copy views of the categorical codes.
    parts: list[np.ndarray] = []
    offset = 0
    previous: int | None = None
    for chunk in phys.get_chunks():
        codes = chunk.to_numpy()
        if codes.size == 0:
            continue
        if previous is None or int(codes[0]) != previous:
            parts.append(np.array([offset], dtype=np.int64))
        parts.append(np.flatnonzero(codes[1:] != codes[:-1]) + (offset + 1))
        previous = int(codes[-1])
        offset += codes.size
        if sum(p.size for p in parts) > max(n // 16, 1024):
            return _qid_rows(qids)  # interleaved queries: per-line form
    starts = np.concatenate(parts).astype(np.int64)
    block_phys = phys.gather(starts).to_numpy()
    _, first, inverse = np.unique(block_phys, return_index=True, return_inverse=True)
    names = qids.gather(starts[first]).cast(pl.String).to_list()
    return QidLayout(names, starts=starts, block_name=inverse.astype(np.int64).reshape(-1))


def _qid_rows(qids: pl.Series) -> QidLayout:
    distinct = qids.unique()
    names = distinct.cast(pl.String).to_list()
    dphys = distinct.to_physical().to_numpy().astype(np.int64)
    lookup = np.full(int(dphys.max()) + 1, -1, dtype=np.int32)
    lookup[dphys] = np.arange(dphys.size, dtype=np.int32)
    return QidLayout(names, row_name=lookup[qids.to_physical().to_numpy()])


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------


def read_qrels(path: PathLike) -> Qrels:
    """Read a TREC qrels file (``qid iter docno rel``).

    Raises :class:`InputError` for a missing/unreadable file, a line that does not have
    exactly four fields, a non-integer grade, or a file without any judgment.
    """
    name = _check_readable(path)
    frame = _fast_qrels(name)
    if frame is None:
        frame = _exact_qrels(name)
    if frame.height == 0:
        raise InputError("no relevance judgments found", path=name)
    return Qrels(frame=frame, path=name)


def read_run(path: PathLike) -> Run:
    """Read a TREC run file (``qid Q0 docno rank score runid``).

    Raises :class:`InputError` for a missing/unreadable file, a line with fewer than six
    fields, a score that is not a number, or a file without any result line.
    """
    name = _check_readable(path)
    cache: dict[str, Any] = {}
    result = _fast_run(name, cache)
    if result is None:
        cache.clear()
        result = _exact_run(name)
    frame, runid = result
    if frame.height == 0:
        raise InputError("no results found", path=name)
    return Run(frame=frame, runid=runid, path=name, _cache=cache)


def _check_readable(path: PathLike) -> str:
    name = os.fspath(path)
    if not os.path.exists(name):
        raise InputError("file not found", path=name)
    if os.path.isdir(name):
        raise InputError("is a directory, not a file", path=name)
    if not os.access(name, os.R_OK):
        raise InputError("file is not readable", path=name)
    return name


def _scan(
    path: str,
    separator: str,
    columns: Sequence[str],
    types: Mapping[str, pl.DataType],
    keep: Sequence[str],
    *,
    ragged: bool,
    comments: bool,
) -> pl.DataFrame | None:
    """polars CSV scan with a one-byte separator, keeping only ``keep``; None when polars
    rejects the file."""
    schema = {c: types.get(c, pl.String) for c in columns}
    try:
        return (
            pl.scan_csv(
                path,
                separator=separator,
                has_header=False,
                schema=schema,
                quote_char=None,
                comment_prefix="#" if comments else None,
                truncate_ragged_lines=ragged,
                missing_columns="insert",  # a file whose lines all lack the last columns
                raise_if_empty=False,
                encoding="utf8",
            )
            .select(keep)
            .collect()
        )
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError):
        return None


def _drop_blank(frame: pl.DataFrame) -> pl.DataFrame:
    """Blank lines come back as all-null rows; drop them (trec_eval skips them too)."""
    if frame.height == 0:
        return frame
    blank = pl.all_horizontal(pl.all().is_null())
    if frame.select(blank.any()).item():
        frame = frame.filter(~blank)
    return frame


def _has_nulls(frame: pl.DataFrame, columns: Iterable[str]) -> bool:
    counts = frame.select(pl.col(c).null_count() for c in columns).row(0)
    return any(counts)


def _fast_run(path: str, cache: dict[str, Any] | None = None) -> tuple[pl.DataFrame, str] | None:
    """Columnar read for single-space or single-tab separated runs; None if unsure.

    ``cache`` receives the qid blocks when they were computed on the way (see Run)."""
    if cache is None:
        cache = {}
    sep = _guess_separator(path)
    if sep is None:
        return None
    types: dict[str, pl.DataType] = {"qid": pl.Categorical(), "runid": pl.Categorical()}
    if sep == " ":
        types["score"] = pl.Float64()
    keep = ("qid", "docno", "score", "runid")
    # The byte scan for stray whitespace runs in a thread while polars parses (polars
    # releases the GIL), so on a multi-core machine it costs little wall time.
    with ThreadPoolExecutor(max_workers=1) as pool:
        odd = pool.submit(_has_odd_whitespace, path, sep)
        # Comment lines are rare: read without comment handling first (faster), and again
        # with it when a line starting with '#' shows up (as a query id or a parse failure).
        frame = _scan(path, sep, _RUN_COLUMNS, types, keep, ragged=True, comments=False)
        if odd.result():
            return None
    if frame is None or _has_comment_rows(frame, cache):
        cache.clear()
        frame = _scan(path, sep, _RUN_COLUMNS, types, keep, ragged=True, comments=True)
    if frame is None:
        return None
    height = frame.height
    frame = _drop_blank(frame)
    blank = frame.height != height
    if frame.height == 0:
        return frame.select("qid", "docno", "score"), ""
    if sep == "\t" or blank:
        cache.clear()
    if sep == "\t":
        frame = _strip_tab_fields(frame)
        if frame is None:
            return None
    if _has_nulls(frame, frame.columns) or frame.get_column("score").is_nan().any():
        return None
    runid = frame.get_column("runid")[-1]
    return frame.select("qid", "docno", "score"), str(runid)


def _has_comment_rows(frame: pl.DataFrame, cache: dict[str, Any]) -> bool:
    cache["qids"] = _qid_layout(frame.get_column("qid"))
    return any(name.startswith("#") for name in cache["qids"].names)


def _strip_tab_fields(frame: pl.DataFrame) -> pl.DataFrame | None:
    """Tab-separated runs often pad fields with spaces (e.g. "\t  2.129133\t"); strip them and
    make sure no field holds inner whitespace (trec_eval would split it)."""
    stripped = frame.select(
        pl.col("qid").cast(pl.String).str.strip_chars(_WS),
        pl.col("docno").str.strip_chars(_WS),
        pl.col("score").str.strip_chars(_WS),
        pl.col("runid").cast(pl.String).str.strip_chars(_WS),
    )
    bad = stripped.select(
        pl.any_horizontal(
            (pl.col(c).str.len_bytes() == 0) | pl.col(c).str.contains(" ", literal=True)
            for c in stripped.columns
        ).any()
    ).item()
    if bad:
        return None
    parsed = stripped.get_column("score").cast(pl.Float64, strict=False)
    if parsed.null_count() or not _all_floats(stripped.get_column("score")):
        return None
    return stripped.with_columns(
        pl.col("qid").cast(pl.Categorical()),
        score=parsed,
        runid=pl.col("runid").cast(pl.Categorical()),
    )


def _has_odd_whitespace(path: str, sep: str) -> bool:
    """Whitespace other than the separator and line ends (trec_eval splits on it, polars would
    keep it inside a field). A raw byte scan through one reused buffer: fast, and no memory
    growth on big files."""
    others = [b"\x0b", b"\x0c"] + ([b"\t"] if sep == " " else [])
    stray_cr = re.compile(rb"\r(?!\n)")
    buf = bytearray(1 << 23)
    view = memoryview(buf)
    pending_cr = False  # the previous buffer ended with "\r"
    with open(path, "rb") as fh:
        while size := fh.readinto(buf):
            if pending_cr and buf[0] != ord("\n"):
                return True
            if any(buf.find(ch, 0, size) >= 0 for ch in others):
                return True
            pending_cr = False
            if buf.find(b"\r", 0, size) >= 0:
                hit = stray_cr.search(view[:size])
                if hit is not None:
                    if hit.start() < size - 1:
                        return True
                    pending_cr = True  # decided by the next buffer's first byte
    return False  # (a "\r" ending the file ends its last line, as "\n" would)


def _all_floats(values: pl.Series) -> bool:
    """polars' float cast accepts a few spellings C's atof does not; check the odd ones."""
    plain = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
    odd = values.filter(~values.str.contains(plain))
    return all(_FLOAT_RE.fullmatch(v.encode()) for v in odd.unique().to_list())


def _fast_qrels(path: str) -> pl.DataFrame | None:
    sep = _guess_separator(path)
    if sep is None or _has_odd_whitespace(path, sep):
        return None
    types: dict[str, pl.DataType] = {"rel": pl.Int64()} if sep == " " else {}
    keep = ("qid", "docno", "rel", "extra")
    frame = _scan(path, sep, _QRELS_COLUMNS, types, keep, ragged=True, comments=True)
    if frame is None:
        return None
    frame = _drop_blank(frame)
    if frame.get_column("extra").null_count() != frame.height:
        return None  # a line with more than 4 fields: the exact parser reports it
    frame = frame.drop("extra")
    if sep == "\t":
        stripped = frame.select(pl.all().str.strip_chars(_WS))
        bad = stripped.select(
            pl.any_horizontal(
                (pl.col(c).str.len_bytes() == 0) | pl.col(c).str.contains(" ", literal=True)
                for c in stripped.columns
            ).any()
        ).item()
        if bad or not stripped.get_column("rel").str.contains(r"^[+-]?[0-9]+$").all():
            return None
        frame = stripped.with_columns(pl.col("rel").cast(pl.Int64))
    if _has_nulls(frame, frame.columns):
        return None
    return frame


def _guess_separator(path: str) -> str | None:
    """Look at the first data lines: a single space or a single tab between fields."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    lines = [ln for ln in head.split(b"\n")[:-1] if ln.strip() and not ln.lstrip().startswith(b"#")]
    if not lines:
        return " " if not head.strip() else None
    sample = lines[:50]
    if all(b"\t" not in ln and b"  " not in ln.rstrip(b"\r") and ln[:1] != b" " for ln in sample):
        return " "
    if all(b"\t" in ln for ln in sample):
        return "\t"
    return None


# ------------------------------------------------------------------------------------------
# Exact line-by-line parsing (fallback and error reporting)
# ------------------------------------------------------------------------------------------


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


def _exact_qrels(path: str) -> pl.DataFrame:
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
        if not _INT_RE.fullmatch(rel):
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


def _exact_run(path: str) -> tuple[pl.DataFrame, str]:
    qids: list[str] = []
    docnos: list[str] = []
    scores: list[float] = []
    runid = ""
    for lineno, fields in _data_lines(path):
        if len(fields) < 6:
            missing = _RUN_COLUMNS[len(fields)]
            raise InputError(
                f"expected 6 fields 'qid Q0 docno rank score runid', found {len(fields)}",
                path=path,
                line=lineno,
                field=missing,
            )
        score = fields[4]
        if not _FLOAT_RE.fullmatch(score):
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


# ------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------


def write_run(
    dest: PathLike | TextIO,
    run: Run | pl.DataFrame | Mapping[str, Mapping[str, float] | Sequence[tuple[str, float]]],
    *,
    runid: str | None = None,
    max_per_query: int | None = None,
) -> int:
    """Write a run in TREC format: ``qid Q0 docno rank score runid``, one line per result.

    ``run`` is a :class:`Run`, a polars DataFrame with ``qid``, ``docno`` and ``score``
    columns, or a mapping ``{qid: {docno: score}}`` (or ``{qid: [(docno, score), ...]}``).
    Results are written in trec_eval's ranking order -- queries in ``strcmp`` order, then score
    descending, ties broken by docno descending -- with ranks 1..n, so reading the file back
    (with any TREC tool) gives the same ranking. ``max_per_query`` keeps only the top results
    of each query. Scores are written with the shortest repr that round-trips a float64.
    ``runid`` defaults to the run's own name (or ``"rageval"``); it may not contain whitespace.
    Returns the number of lines written.
    """
    frame, default_id = _run_frame(run)
    name = runid if runid is not None else (default_id or "rageval")
    if not name or any(ch in name for ch in _WS):
        raise InputError(f"runid must be a non-empty string without whitespace, got {name!r}")
    bad = frame.filter(
        pl.col("qid").str.contains_any(list(_WS)) | pl.col("docno").str.contains_any(list(_WS))
        | (pl.col("qid").str.len_bytes() == 0) | (pl.col("docno").str.len_bytes() == 0)
    )
    if bad.height:
        row = bad.row(0, named=True)
        raise InputError(
            f"query and document ids must be non-empty and contain no whitespace, got "
            f"qid={row['qid']!r} docno={row['docno']!r}"
        )
    if frame.select(pl.col("score").is_nan().any()).item():
        raise InputError("scores must be numbers, found NaN")
    ordered = frame.sort(["qid", "score", "docno"], descending=[False, True, True])
    ordered = ordered.with_columns(rank=pl.int_range(1, pl.len() + 1).over("qid"))
    if max_per_query is not None:
        ordered = ordered.filter(pl.col("rank") <= max_per_query)
    lines = ordered.select(
        pl.concat_str(
            [
                pl.col("qid"),
                pl.lit("Q0"),
                pl.col("docno"),
                pl.col("rank").cast(pl.String),
                pl.col("score").cast(pl.String),
                pl.lit(name),
            ],
            separator=" ",
        ).alias("line")
    ).get_column("line")
    text = "\n".join(lines.to_list())
    if text:
        text += "\n"
    if isinstance(dest, str | os.PathLike):
        Path(dest).write_text(text, encoding="utf-8")
    else:
        dest.write(text)
    return lines.len()


def _run_frame(
    run: Run | pl.DataFrame | Mapping[str, Mapping[str, float] | Sequence[tuple[str, float]]],
) -> tuple[pl.DataFrame, str]:
    if isinstance(run, Run):
        frame, default_id = run.frame, run.runid
    elif isinstance(run, pl.DataFrame):
        missing = {"qid", "docno", "score"} - set(run.columns)
        if missing:
            raise InputError(f"run frame lacks column(s): {', '.join(sorted(missing))}")
        frame, default_id = run, ""
    else:
        qids: list[str] = []
        docnos: list[str] = []
        scores: list[float] = []
        for qid, results in run.items():
            pairs = results.items() if isinstance(results, Mapping) else results
            for docno, score in pairs:
                qids.append(str(qid))
                docnos.append(str(docno))
                scores.append(float(score))
        frame = pl.DataFrame({"qid": qids, "docno": docnos, "score": scores})
        default_id = ""
    frame = frame.select(
        pl.col("qid").cast(pl.String),
        pl.col("docno").cast(pl.String),
        pl.col("score").cast(pl.Float64),
    )
    dup = frame.select(pl.struct("qid", "docno").is_duplicated().any()).item()
    if dup:
        raise InputError("a document appears twice for the same query")
    return frame, default_id
