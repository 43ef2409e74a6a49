"""The shortcuts of trec-eval's streamed read held to the slower paths they stand in for.

- A space-separated slice is read in two columns (docno, score) where the compiled check
  proves six fields a line, in four (qid, docno, score, runid) otherwise when no space is
  doubled; whatever it accepts must be what the exact line-by-line parser reads, and what the
  exact parser refuses it must refuse.
- Per-topic lines are formatted a column at a time; each value must print as the value-by-value
  formatters print it.
- Streamed judgments are taken as row ranges of the qrels in their own topic order and checked
  for documents judged twice once; the output must be the whole-file output.
"""

from __future__ import annotations

import io
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from rageval.core.errors import RagevalError
from rageval.retrieval.trec import fast_read
from rageval.retrieval.trec.exact_read import exact_run
from rageval.retrieval.trec.fast_read import run_slice
from rageval.retrieval.trec_eval.evaluation import Options, run_evaluation
from rageval.retrieval.trec_eval.output import _fmt_double, _fmt_long, _formatted, write_results

AWKWARD_RUNS = [
    "1 Q0 a 1 2.5 r\n1 Q0 b 2 2.5 r\n2 Q0 c 1 2.5 s\n",  # ties
    "1 Q0 a 1 1e-3 r\n1 Q0 b 2 2.5E+02 r\n1 Q0 c 3 -.5e1 r\n",  # scientific notation
    "1 Q0 a 1 2.5 r\n\n1 Q0 b 2 1.5 r\n",  # a blank line
    "1 Q0 a 1 2.5 r\n Q0\n",  # a line opened by a separator that reads as blank in 4 columns
    " Q0 a 1 2.5 r\n",  # a separator opening the slice
    "1  Q0 a 1 2.5 r\n",  # a doubled separator
    "1 Q0 a 1 2.5 r\n1  b 2 1.5 r\n",  # an empty iter: five fields for trec_eval
    "1 Q0 a  2.5 r\n",  # an empty rank
    "1 Q0 a 1 2.5\n",  # five fields
    "1 Q0 a 1 2.5 \n",  # five fields and a trailing separator
    "1 Q0 a 1 2.5 r \n",  # six fields and a trailing separator
    "1 Q0 a 1 2.5 r extra  fields\n",  # more than six fields
    '1 Q0 a" 1 2.5 r\n',  # a quote before a separator
    "1 Q0 a 1 nan r\n",
    "1 Q0 a 1 inf r\n1 Q0 b 2 -inf r\n",
    "1 Q0 a 1 0x1p3 r\n",  # hexadecimal: atof reads it, a float parser may not
    "1 Q0 a 1 2.5x r\n",  # not entirely a number
    "1 Q0 a 1 2.5 r\r\n1 Q0 b 2 1.5 r\r\n",  # CRLF
    "1 Q0 a 1 2.5 r\n1 Q0 b 2 1.5 r",  # no final newline
    "1 Q0 a 1 2.5 r\n1 Q0 a 2 1.5 r\n",  # a document twice (the ranking refuses it)
]


def rows(frame: pl.DataFrame) -> list[tuple[str, str, float]]:
    cast = frame.select(pl.col("qid").cast(pl.String), "docno", "score")
    return [tuple(row) for row in cast.rows()]  # type: ignore[misc]


@pytest.mark.filterwarnings("ignore:.*not entirely a number")
@pytest.mark.parametrize("text", AWKWARD_RUNS)
@pytest.mark.parametrize("compiled_proof", [True, False])
def test_slice_read_is_the_exact_read_or_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 text: str, compiled_proof: bool) -> None:
    if not compiled_proof:  # the checks in Python decide every slice, as without a compiler
        monkeypatch.setattr(fast_read, "six_field_blocks", None)
    path = tmp_path / "run"
    path.write_bytes(text.encode())
    fast = run_slice(text.encode(), " ")
    try:
        exact, exact_runid = exact_run(str(path), like_trec_eval=True)
    except RagevalError:
        assert fast is None  # what the exact parser refuses, the slice read refuses
        return
    if fast is None:
        return  # left to the exact parser: always allowed
    frame, runid = fast
    assert rows(frame) == rows(exact)
    assert runid == exact_runid


def test_the_four_column_read_takes_well_formed_slices() -> None:
    """Not everything falls back: a plain slice is read."""
    parsed = run_slice(b"1 Q0 a 1 2.5 r\n1 Q0 b 2 1.5e1 s\n", " ")
    assert parsed is not None
    assert rows(parsed[0]) == [("1", "a", 2.5), ("1", "b", 15.0)]
    assert parsed[1] == "s"


@pytest.mark.parametrize("as_long", [False, True])
def test_column_formatting_is_value_formatting(as_long: bool) -> None:
    values = np.array([0.0, -0.0, 0.25, 1 / 3, 2.00005, 12345.6789, -7.5, 3.0, 1e-9, 2.0**62,
                       2.0**70, math.inf, -math.inf, math.nan, -math.nan])
    fmt = _fmt_long if as_long else _fmt_double
    for column in (values, values[:11], values[:10]):  # with, and without, the odd values
        spec, values_out = _formatted(column, as_long)
        assert [spec % v for v in values_out] == [fmt(v) for v in column.tolist()]


def test_per_topic_lines_are_the_values_formatted_one_by_one(tmp_path: Path) -> None:
    """The per-topic lines, filled into one template a topic, read as each value printed on
    its own: names holding '%' (measure parameters may), strings, counts and NaN."""
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\nq%s 0 d1 1\n")
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d9 2 1.0 r\nq2 Q0 d4 1 1.0 r\nq%s Q0 d1 1 1 r\n")
    specs = ["relstring.2%", "ndcg.1=3%", "num_rel", "P.5", "gm_map"]
    opts = Options(query_flag=True, summary_flag=False)
    qids, results = run_evaluation(str(qrels), str(run), specs, opts)
    precision = next(res for res in results if res.selected.names == ("P_5",))
    precision.per_query[1, 0] = math.nan  # type: ignore[index]
    out = io.StringIO()
    write_results(qids, results, opts, out)
    expected = []
    for i, qid in enumerate(qids):
        for res in results:
            kind = res.selected.measure.kind
            for k, name in enumerate(res.selected.names):
                if kind == "relstring":
                    text = f"'{res.per_query[i]}'"  # type: ignore[index]
                elif kind == "gm":
                    continue
                else:
                    fmt = _fmt_long if kind == "long" else _fmt_double
                    text = fmt(float(res.per_query[i, k]))  # type: ignore[call-overload]
                expected.append(f"{name:<22}\t{qid}\t{text}\n")
    assert "relstring_2%" in out.getvalue() and "\tq%s\t" in out.getvalue()
    assert out.getvalue() == "".join(expected)


QRELS = "q2 0 d1 1\nq1 0 d2 1\nq1 0 d3 2\nq3 0 d8 1\nq2 0 d4 0\nq3 0 d7 0\nq4 0 d1 1\n"
RUN = (
    "q1 Q0 d1 1 3.0 s\nq1 Q0 d2 2 2.0 s\nq1 Q0 d3 3 2.0 s\n"
    "q2 Q0 d4 1 1.5 s\nq2 Q0 d1 2 1.0 s\nq3 Q0 d9 1 0.5 s\nq3 Q0 d8 2 0.5 s\n"
    "q4 Q0 d1 1 1.0 s\nq5 Q0 d1 1 1.0 s\n"
)


def render(qrels: str, run: str, opts: Options) -> str:
    try:
        qids, results = run_evaluation(qrels, run, ["all_trec", "relstring.3"], opts)
    except RagevalError as exc:
        return f"{type(exc).__name__}: {exc}"
    out = io.StringIO()
    write_results(qids, results, opts, out)
    return out.getvalue()


@pytest.mark.parametrize("qrels_text", [
    QRELS,  # topics interleaved, and not in the run's order
    QRELS + "q3 0 d9 2\n",  # a topic's judgments in two places
    QRELS + "q2 0 d1 2\n",  # a document judged twice
    QRELS.replace("q4 0 d1 1\n", "") + "q6 0 d1 1\n",  # a topic only in the qrels
])
@pytest.mark.parametrize("chunk", [1, 20, 50, 1 << 20])
@pytest.mark.parametrize("opts", [Options(query_flag=True),
                                  Options(query_flag=True, all_queries=True)])
def test_streamed_judgments_give_the_whole_file_output(tmp_path: Path, qrels_text: str,
                                                       chunk: int, opts: Options) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text(qrels_text)
    run.write_text(RUN)
    whole = render(str(qrels), str(run), replace(opts, chunk_bytes=0))
    assert render(str(qrels), str(run), replace(opts, chunk_bytes=chunk)) == whole


@pytest.mark.parametrize("at", [0, 1, (1 << 20) - 2, (1 << 20) - 1, 1 << 20, (1 << 20) + 1])
def test_byte_checks_see_across_the_blocks_they_scan(at: int) -> None:
    """The checks scan a slice in blocks: a pair of spaces or a tab is found wherever it is."""
    from rageval.retrieval.trec.fast_read import slice_byte_facts

    plain = bytearray(b"x" * ((1 << 21) + 7))
    assert slice_byte_facts(bytes(plain), " ") == (False, False, None)  # (nothing proven)
    doubled = plain.copy()
    doubled[at:at + 2] = b"  "
    assert slice_byte_facts(bytes(doubled), " ") == (False, True, None)
    tab = plain.copy()
    tab[at] = ord("\t")
    assert slice_byte_facts(bytes(tab), " ")[0]
    carriage_return = plain.copy()
    carriage_return[at] = ord("\r")
    assert slice_byte_facts(bytes(carriage_return), " ")[0]
