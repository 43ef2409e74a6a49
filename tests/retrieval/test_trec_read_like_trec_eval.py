"""What the TREC readers accept: C's number parsing against the C library itself, the
``like_trec_eval`` reading rules (trec_eval 10.0's), and the columnar fast path never shifting
columns on a doubled separator."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import warnings
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.errors import InputError, InputWarning
from rageval.retrieval.trec import read_qrels, read_run
from rageval.retrieval.trec.syntax import c_atof, c_atol

_LIBC_NAME = ctypes.util.find_library("c")
libc = ctypes.CDLL(_LIBC_NAME) if _LIBC_NAME else None
needs_libc = pytest.mark.skipif(libc is None, reason="no C library found by ctypes")
if libc is not None:
    libc.atof.restype = ctypes.c_double
    libc.atof.argtypes = [ctypes.c_char_p]
    libc.atol.restype = ctypes.c_long
    libc.atol.argtypes = [ctypes.c_char_p]
    libc.strtod.restype = ctypes.c_double
    libc.strtod.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]


def strtod_reads_all(token: bytes) -> bool:
    """Whether the C library's strtod consumes the whole token (its end pointer)."""
    assert libc is not None
    buffer = ctypes.create_string_buffer(token)
    end = ctypes.c_char_p()
    libc.strtod(buffer, ctypes.byref(end))
    consumed = ctypes.cast(end, ctypes.c_void_p).value - ctypes.addressof(buffer)  # type: ignore[operator]
    return consumed == len(token)

# Tokens built from the characters that matter to strtod: digits, signs, points, exponents,
# hex prefixes and the letters of inf/nan, with stray characters after them.
TOKEN = st.text(alphabet="0123456789+-.eEpPxXaAbcfFinINtyz()_", min_size=1, max_size=14)


@needs_libc
@settings(max_examples=2000, deadline=None)
@given(TOKEN)
def test_c_atof_is_the_c_library_atof(token: str) -> None:
    assert libc is not None
    ours, whole = c_atof(token.encode())
    theirs = libc.atof(token.encode())
    if math.isnan(theirs):
        assert math.isnan(ours)
    else:
        assert ours == theirs and math.copysign(1.0, ours) == math.copysign(1.0, theirs)
    assert whole == strtod_reads_all(token.encode())


@needs_libc
@settings(max_examples=1000, deadline=None)
@given(st.one_of(TOKEN, st.integers(-(2**70), 2**70).map(str)))
def test_c_atol_is_the_c_library_atol(token: str) -> None:
    assert libc is not None
    assert c_atol(token.encode())[0] == libc.atol(token.encode())


@pytest.mark.parametrize(("token", "value", "whole"), [
    ("0x1p3", 8.0, True), ("12abc", 12.0, False), ("abc", 0.0, False), ("1e", 1.0, False),
    ("-Infinity", -math.inf, True), ("infin", math.inf, False), ("0x1p99999", math.inf, True),
    (".5e1", 5.0, True), ("+2.", 2.0, True),
])
def test_c_atof_examples(token: str, value: float, whole: bool) -> None:
    assert c_atof(token.encode()) == (value, whole)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def scores(path: Path, **kwargs: bool) -> list[float]:
    return read_run(path, **kwargs).frame.get_column("score").to_list()


def test_scores_read_as_atof_reads_them_with_one_warning(tmp_path: Path) -> None:
    path = write(tmp_path, "run", "1 Q0 a 1 0x1p3 r\n1 Q0 b 2 12abc r\n1 Q0 c 3 none r\n"
                                  "1 Q0 d 4 2e0x r\n1 Q0 e 5 1.5 r\n")
    with pytest.warns(InputWarning) as caught:
        assert scores(path, like_trec_eval=True) == [8.0, 12.0, 0.0, 2.0, 1.5]
    (warning,) = caught
    text = str(warning.message)
    assert "3 score(s)" in text and "line 2: '12abc' read as 12" in text
    assert "line 3: 'none' read as 0" in text and "line 4" in text
    with pytest.raises(InputError, match="score must be a number") as err:
        read_run(path)  # rageval's own reading stays strict
    assert err.value.line == 1


def test_a_nan_score_is_refused_either_way(tmp_path: Path) -> None:
    path = write(tmp_path, "run", "1 Q0 a 1 1.0 r\n1 Q0 b 2 nan(7)x r\n")
    with pytest.raises(InputError, match="no defined order") as err:
        read_run(path, like_trec_eval=True)
    assert err.value.line == 2 and err.value.field == "score"


def test_grades_read_as_atol_reads_them(tmp_path: Path) -> None:
    path = write(tmp_path, "qrels", "1 0 a 1x\n1 0 b 2.7\n1 0 c +3\n1 0 d -\n")
    with pytest.warns(InputWarning, match=r"3 grade\(s\)"):
        qrels = read_qrels(path, like_trec_eval=True)
    assert qrels.frame.get_column("rel").to_list() == [1, 2, 3, 0]
    with pytest.raises(InputError, match="must be an integer"):
        read_qrels(path)


@pytest.mark.parametrize("text", ["1 0 a 1\n\n1 0 b 1\n", "1 0 a 1\n \t \n1 0 b 1\n"])
def test_a_blank_qrels_line_is_an_error_like_trec_eval(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "qrels", text)
    with pytest.raises(InputError, match="blank line") as err:
        read_qrels(path, like_trec_eval=True)
    assert err.value.line == 2
    assert read_qrels(path).frame.height == 2  # rageval's own reading skips it


def test_qrels_comments_follow_trec_eval_10(tmp_path: Path) -> None:
    one = write(tmp_path, "one", "# header\n1 0 a 1\n# between\n1 0 b 0\n# last line\n")
    assert read_qrels(one, like_trec_eval=True).frame.height == 2
    two = write(tmp_path, "two", "# header\n# second header\n1 0 a 1\n")
    with pytest.raises(InputError, match="right after a comment line") as err:
        read_qrels(two, like_trec_eval=True)
    assert err.value.line == 2
    judged = write(tmp_path, "judged", "# header\n# 0 doc 1\n1 0 a 1\n")
    frame = read_qrels(judged, like_trec_eval=True).frame
    assert frame.get_column("qid").to_list() == ["#", "1"]  # as trec_eval reads it
    indented = write(tmp_path, "indented", "  # not in column 0\n1 0 a 1\n")
    with pytest.raises(InputError, match="column 0"):
        read_qrels(indented, like_trec_eval=True)
    for path in (two, judged, indented):
        assert read_qrels(path).frame.get_column("qid").to_list() == ["1"]


def _long_run(separator: str, odd_line: str) -> str:
    lines = [separator.join(["1", "Q0", f"d{i}", str(i), str(100 - i), "r"]) for i in range(80)]
    lines[70] = odd_line
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("separator", "odd_line"), [
    (" ", "1 Q0 d70  70 1000 r"),
    ("\t", "1\tQ0\td70\t\t70\t1000\tr"),
    (" ", " 1 Q0 d70 70 1000 r"),
    ("\t", "\t1\tQ0\td70\t70\t1000\tr"),
])
def test_a_doubled_separator_never_shifts_columns(tmp_path: Path, separator: str,
                                                  odd_line: str) -> None:
    """trec_eval takes any run of whitespace as one separator; a columnar read would see an
    empty field there (and read the rank as the score) if it did not hand such files over."""
    path = write(tmp_path, "run", _long_run(separator, odd_line))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = read_run(path).frame
    row = frame.filter(pl.col("docno") == "d70")
    assert row.get_column("score").to_list() == [1000.0]
