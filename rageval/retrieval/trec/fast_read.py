"""The columnar fast path of the TREC readers: polars' CSV reader, proven exact or refused.

Files separated by single spaces, or by single tabs with space-padded fields, are read by
polars; :func:`fast_run` and :func:`fast_qrels` return None for any file they cannot prove
well-formed (odd whitespace, missing fields, numbers C would not read), which the exact
parser (:mod:`rageval.retrieval.trec.exact_read`) then reads or rejects. A slice of a run
proven to hold six fields a line by the compiled check (``_six_fields.c``, built where a C
compiler is found at install) is parsed for the documents and scores only, its topics taken
from the blocks the proof found; without it, or where it proves nothing, the checks in Python
and the parsed topic and runid columns decide.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from rageval.retrieval.trec.frames import qid_layout_of
from rageval.retrieval.trec.syntax import FLOAT_RE, QRELS_COLUMNS, RUN_COLUMNS, WHITESPACE

try:  # compiled at install where a C compiler is found (pyproject.toml's ext-modules)
    from rageval.retrieval.trec._six_fields import six_field_blocks
except ImportError:  # the checks in Python and the parsed columns decide each slice instead
    six_field_blocks = None

# What the compiled proof returns for a slice of six-field lines: its number of lines, and the
# topic and first line of each block of lines of one topic.
SixFieldLines = tuple[int, list[str], list[int]]


def _scan(
    path: str | bytes,
    separator: str,
    columns: Sequence[str],
    types: Mapping[str, pl.DataType],
    keep: Sequence[str],
    *,
    ragged: bool,
    comments: bool,
) -> pl.DataFrame | None:
    """polars CSV scan (of a file, or of whole lines in memory) with a one-byte separator,
    keeping only ``keep``; None when polars rejects the input."""
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


def _run_types(sep: str) -> dict[str, pl.DataType]:
    types: dict[str, pl.DataType] = {"qid": pl.Categorical(), "runid": pl.Categorical()}
    if sep == " ":
        types["score"] = pl.Float64()
    return types


_RUN_KEEP = ("qid", "docno", "score", "runid")


def fast_run(path: str, cache: dict[str, Any] | None = None) -> tuple[pl.DataFrame, str] | None:
    """Columnar read for single-space or single-tab separated runs; None if unsure.

    ``cache`` receives the qid blocks when they were computed on the way (see Run)."""
    if cache is None:
        cache = {}
    sep = guess_separator(path)
    if sep is None:
        return None
    types = _run_types(sep)
    # The byte scan for stray whitespace runs in a thread while polars parses (polars
    # releases the GIL), so on a multi-core machine it costs little wall time.
    with ThreadPoolExecutor(max_workers=1) as pool:
        odd = pool.submit(_has_odd_whitespace, path, sep)
        # Comment lines are rare: read without comment handling first (faster), and again
        # with it when a line starting with '#' shows up (as a query id or a parse failure).
        frame = _scan(path, sep, RUN_COLUMNS, types, _RUN_KEEP, ragged=True, comments=False)
        if odd.result():
            return None
    if frame is not None:  # blank lines read as rows of nulls: gone before qids are looked at
        frame = _drop_blank(frame)
    if frame is None or _has_comment_rows(frame, cache):
        cache.clear()
        frame = _scan(path, sep, RUN_COLUMNS, types, _RUN_KEEP, ragged=True, comments=True)
        if frame is None:
            return None
        frame = _drop_blank(frame)
    if sep == "\t":
        cache.clear()  # the tab path rebuilds its columns: blocks found before do not carry
    return _checked_run(frame, sep)


class SliceFacts(NamedTuple):
    """What the bytes of a slice say before it is parsed (see :func:`slice_byte_facts`)."""

    odd: bool  # whitespace the columnar read would get wrong: the slice is refused
    doubled: bool  # two spaces in a row somewhere (a space separator)
    # Proven: every line six non-empty fields split by single spaces, all ASCII, no other
    # whitespace than the line ends (and then neither odd nor doubled); None where not.
    six_fields: SixFieldLines | None = None


def run_slice(data: bytes, sep: str,
              byte_facts: SliceFacts | None = None) -> tuple[pl.DataFrame, str] | None:
    """Whole lines of a run file (a slice starting at a line start), read as :func:`fast_run`
    reads a file, except that a comment line is refused too; None if unsure. The runid is that
    of the slice's last line ("" for a slice of blank lines). ``byte_facts`` is what
    :func:`slice_byte_facts` says of ``data``, where the caller found it already."""
    odd, doubled, six_fields = slice_byte_facts(data, sep) if byte_facts is None else byte_facts
    if odd:
        return None
    if six_fields is not None:
        return _six_field_slice(data, sep, six_fields)
    # Only the last runid is kept: a String column costs less to parse than a Categorical.
    types = {**_run_types(sep), "runid": pl.String()}
    if sep == " " and not doubled:
        # Every empty field now opens a line, or is a missing one: the iter and rank columns,
        # which trec_eval ignores, need not be read to find empty fields.
        frame = _scan(data, sep, RUN_COLUMNS, types, _RUN_KEEP, ragged=True, comments=False)
        if frame is None:
            return None
        if frame.height and not any(frame.null_count().row(0)):  # (counts kept by polars)
            # No blank line and no missing field (" Q0" would read as blank: the full read
            # below decides such slices).
            if frame.get_column("score").is_nan().any():  # (no copy of a chunked column)
                return None
            return frame.drop("runid"), str(frame.get_column("runid")[-1])
    frame = None
    if sep == " ":
        # Ranks are read only to find empty fields (trec_eval ignores them): as integers they
        # cost a quarter less to parse than as strings, which a slice falls back to when some
        # rank is not an integer.
        frame = _scan(data, sep, RUN_COLUMNS, {**types, "rank": pl.Int64()}, RUN_COLUMNS,
                      ragged=True, comments=False)
    if frame is None:
        frame = _scan(data, sep, RUN_COLUMNS, types, RUN_COLUMNS, ragged=True, comments=False)
    if frame is None:
        return None
    frame = _drop_blank(frame)
    # A doubled separator, or one opening a line, makes an empty field, which polars reads
    # as null: checking every column for nulls replaces the byte scan for such pairs (the
    # slowest part of that scan), and only costs materialising two short columns.
    if _has_nulls(frame, ("iter", "rank")):
        return None
    return _checked_run(frame.drop("iter", "rank"), sep)


def _six_field_slice(data: bytes, sep: str,
                     proven: SixFieldLines) -> tuple[pl.DataFrame, str] | None:
    """A slice proven to hold six fields a line: the documents and scores are parsed (no field
    is empty, none holds whitespace), each line's topic is its block's, and the runid is the
    last line's last field."""
    lines, topics, starts = proven
    frame = _scan(data, sep, RUN_COLUMNS, _run_types(sep), ("docno", "score"),
                  ragged=True, comments=False)
    if (frame is None or frame.height != lines or any(frame.null_count().row(0))
            or frame.get_column("score").is_nan().any()):
        return None  # a score polars reads as no number, or as NaN: the full read decides
    lengths = np.diff(np.array([*starts, lines], dtype=np.int64))
    # (polars' own index type: indices from numpy int64 cost twice as much to gather)
    block_of_line = pl.Series(np.repeat(np.arange(len(topics), dtype=np.uint32), lengths))
    qid = pl.Series("qid", topics, dtype=pl.Categorical()).gather(block_of_line)
    last_field = data[data.rfind(sep.encode()) + 1:].rstrip(b"\n")
    return frame.insert_column(0, qid), last_field.decode("ascii")


def _checked_run(frame: pl.DataFrame, sep: str) -> tuple[pl.DataFrame, str] | None:
    """The (qid, docno, score) columns and runid of a parsed run without blank rows, or None
    when a field is missing or not a number."""
    if frame.height == 0:
        return frame.select("qid", "docno", "score"), ""
    if sep == "\t":
        frame = _strip_tab_fields(frame)
        if frame is None:
            return None
    if _has_nulls(frame, frame.columns) or frame.get_column("score").is_nan().any():
        return None
    runid = frame.get_column("runid")[-1]
    return frame.select("qid", "docno", "score"), str(runid)


def _has_comment_rows(frame: pl.DataFrame, cache: dict[str, Any]) -> bool:
    cache["qids"] = qid_layout_of(frame.get_column("qid"))
    return any(name.startswith("#") for name in cache["qids"].names)


def _strip_tab_fields(frame: pl.DataFrame) -> pl.DataFrame | None:
    """Tab-separated runs often pad fields with spaces (e.g. "\t  2.129133\t"); strip them and
    make sure no field holds inner whitespace (trec_eval would split it)."""
    stripped = frame.select(
        pl.col("qid").cast(pl.String).str.strip_chars(WHITESPACE),
        pl.col("docno").str.strip_chars(WHITESPACE),
        pl.col("score").str.strip_chars(WHITESPACE),
        pl.col("runid").cast(pl.String).str.strip_chars(WHITESPACE),
    )
    if _empty_or_split(stripped):
        return None
    parsed = stripped.get_column("score").cast(pl.Float64, strict=False)
    if parsed.null_count() or not _all_floats(stripped.get_column("score")):
        return None
    return stripped.with_columns(
        pl.col("qid").cast(pl.Categorical()),
        score=parsed,
        runid=pl.col("runid").cast(pl.Categorical()),
    )


def _empty_or_split(stripped: pl.DataFrame) -> bool:
    """Whether a stripped tab-separated field is empty or holds a space (trec_eval would
    split it): the exact parser decides such files."""
    return bool(stripped.select(
        pl.any_horizontal(
            (pl.col(c).str.len_bytes() == 0) | pl.col(c).str.contains(" ", literal=True)
            for c in stripped.columns
        ).any()
    ).item())


_STRAY_CR = re.compile(rb"\r(?!\n)")


def _odd_bytes(sep: str) -> tuple[list[bytes], list[bytes]]:
    """Bytes that make a file odd (see :func:`_has_odd_whitespace`): single ones, and pairs."""
    others = [b"\x0b", b"\x0c"] + ([b"\t"] if sep == " " else [])
    return others, [(sep + sep).encode(), ("\n" + sep).encode()]


# Slices are checked a block at a time, while the block is in the core's cache: the several
# scans of a block then cost about what one scan of the slice from memory costs.
_BLOCK_BYTES = 1 << 20


def slice_byte_facts(data: bytes, sep: str) -> SliceFacts:
    """Whether whole lines in memory (a slice of a file from a line start to a line end, or to
    the file's end) hold the single bytes of :func:`_has_odd_whitespace`, and, for a space
    separator, whether two spaces follow each other somewhere or every line is proven to hold
    six fields (see :func:`run_slice`)."""
    if sep == " " and six_field_blocks is not None:
        proven = six_field_blocks(data)
        if proven is not None:
            return SliceFacts(odd=False, doubled=False, six_fields=proven)
    others, _ = _odd_bytes(sep)
    pairs = np.empty(_BLOCK_BYTES // 2, dtype=bool) if sep == " " else None
    doubled = carriage_return = False
    for start in range(0, len(data), _BLOCK_BYTES):
        end = min(start + _BLOCK_BYTES, len(data))
        if any(data.find(ch, start, end) >= 0 for ch in others):
            return SliceFacts(True, doubled)
        carriage_return = carriage_return or data.find(b"\r", start, end) >= 0
        if pairs is not None and not doubled:  # (one byte more: a pair across blocks)
            doubled = _two_spaces(data, start, min(end + 1, len(data)), pairs)
    if carriage_return:
        hit = _STRAY_CR.search(data)
        if hit is not None and hit.start() < len(data) - 1:  # a final "\r" ends the file
            return SliceFacts(True, doubled)
    return SliceFacts(False, doubled)


def _two_spaces(data: bytes, start: int, end: int, scratch: np.ndarray) -> bool:
    """Whether ``data[start:end]`` holds two spaces in a row: byte pairs compared at both
    alignments (several times faster than ``bytes.find``, which holds the GIL, too)."""
    for first in (start, start + 1):
        count = (end - first) // 2
        if count <= 0:
            continue
        pairs = np.frombuffer(data, dtype="<u2", count=count, offset=first)
        hits = scratch[:count]
        np.equal(pairs, 0x2020, out=hits)
        if hits.any():
            return True
    return False


def _has_odd_whitespace(path: str, sep: str) -> bool:
    """Whitespace the columnar read would get wrong: other whitespace than the separator and
    line ends (trec_eval splits on it, polars would keep it inside a field), and a separator
    doubled or opening a line (trec_eval takes any run of whitespace as one separator, polars
    an empty field that shifts the columns after it). A raw byte scan through one reused
    buffer: fast, and no memory growth on big files."""
    others, pairs = _odd_bytes(sep)
    stray_cr = _STRAY_CR
    buf = bytearray(1 << 23)
    view = memoryview(buf)
    pending_cr = False  # the previous buffer ended with "\r"
    last = b"\n"  # the byte before the buffer: a file starting with the separator counts
    with open(path, "rb") as fh:
        while size := fh.readinto(buf):
            if pending_cr and buf[0] != ord("\n"):
                return True
            if any(buf.find(ch, 0, size) >= 0 for ch in others):
                return True
            if last + bytes(view[:1]) in pairs or any(buf.find(p, 0, size) >= 0 for p in pairs):
                return True
            last = bytes(view[size - 1 : size])
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
    return all(FLOAT_RE.fullmatch(v.encode()) for v in odd.unique().to_list())


def fast_qrels(path: str, like_trec_eval: bool = False) -> pl.DataFrame | None:
    """Columnar read of a qrels file; None if unsure. ``like_trec_eval`` leaves files with
    comment or blank lines to the exact parser, which follows trec_eval's rules for them."""
    sep = guess_separator(path)
    if sep is None or _has_odd_whitespace(path, sep):
        return None
    types: dict[str, pl.DataType] = {"rel": pl.Int64()} if sep == " " else {}
    keep = ("qid", "docno", "rel", "extra")
    frame = _scan(path, sep, QRELS_COLUMNS, types, keep, ragged=True,
                  comments=not like_trec_eval)
    if frame is None:
        return None
    height = frame.height
    frame = _drop_blank(frame)
    if like_trec_eval and (frame.height != height
                           or frame.get_column("qid").str.starts_with("#").any()):
        return None
    if frame.get_column("extra").null_count() != frame.height:
        return None  # a line with more than 4 fields: the exact parser reports it
    frame = frame.drop("extra")
    if sep == "\t":
        stripped = frame.select(pl.all().str.strip_chars(WHITESPACE))
        if (_empty_or_split(stripped)
                or not stripped.get_column("rel").str.contains(r"^[+-]?[0-9]+$").all()):
            return None
        frame = stripped.with_columns(pl.col("rel").cast(pl.Int64))
    if _has_nulls(frame, frame.columns):
        return None
    return frame


def guess_separator(path: str) -> str | None:
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
