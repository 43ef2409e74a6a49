"""A run read and evaluated a slice of topics at a time gives exactly the whole-file result.

Tiny slice sizes put slice boundaries mid-line and mid-topic, spread one topic over many
slices, and make lines longer than a slice; runs that cannot be streamed (a topic met again
after others, odd whitespace, comments, duplicates, stops) must fall back to the whole file
with the same output or the same error.
"""

from __future__ import annotations

import io
import sys
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trec_eval_paths import TEST_DIR as TREC_DATA
from trec_eval_paths import missing

from rageval.core.errors import RagevalError
from rageval.retrieval.trec import read_qrels, read_run
from rageval.retrieval.trec.chunked_read import NotStreamable, RunSlices
from rageval.retrieval.trec_eval import evaluation
from rageval.retrieval.trec_eval.evaluation import Options, run_evaluation
from rageval.retrieval.trec_eval.output import write_results

RUN = (
    "q1 Q0 d1 1 3.0 sysA\nq1 Q0 d2 2 2.0 sysA\nq1 Q0 d3 3 2.0 sysA\n"
    "q2 Q0 d4 1 1.5 sysA\nq2 Q0 d1 2 1.0 sysA\n"
    "q3 Q0 d9 1 0.5 sysA\nq3 Q0 d8 2 0.5 sysA\nq3 Q0 d7 3 0.25 sysB\n"
)
QRELS = "q1 0 d2 1\nq1 0 d3 2\nq2 0 d1 1\nq3 0 d8 1\nq3 0 d7 0\nq4 0 d1 1\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return str(path)


def slices_of(path: str, chunk: int) -> tuple[list[pl.DataFrame], RunSlices]:
    slices = RunSlices(path, chunk)
    return [run.frame for run in slices], slices


def rows(frames: list[pl.DataFrame]) -> list[tuple[str, str, float]]:
    if not frames:
        return []
    whole = pl.concat(frames).with_columns(pl.col("qid").cast(pl.String))
    return [tuple(r) for r in whole.rows()]  # type: ignore[misc]


def render(qrels: str, run: str, specs: list[str], opts: Options) -> str:
    """The output, or the error, of an evaluation."""
    try:
        qids, results = run_evaluation(qrels, run, specs, opts)
    except RagevalError as exc:
        return f"{type(exc).__name__}: {exc}"
    out = io.StringIO()
    write_results(qids, results, opts, out)
    return out.getvalue()


# ------------------------------------------------------------------------------------------
# The slices
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 2, 7, 20, 33, 60, 1 << 20])
def test_slices_hold_whole_topics_in_file_order(tmp_path: Path, chunk: int) -> None:
    path = write(tmp_path, "run", RUN)
    frames, slices = slices_of(path, chunk)
    whole = read_run(path)
    assert rows(frames) == [
        (q, d, s) for q, d, s in zip(whole.frame.get_column("qid").cast(pl.String).to_list(),
                                     whole.frame.get_column("docno").to_list(),
                                     whole.frame.get_column("score").to_list(), strict=True)]
    topics = [frame.get_column("qid").cast(pl.String).unique().to_list() for frame in frames]
    flat = [q for names in topics for q in names]
    assert sorted(flat) == ["q1", "q2", "q3"]  # no topic in two slices
    assert slices.names == {"q1", "q2", "q3"}
    assert slices.runid == whole.runid == "sysB"


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_one_topic_spread_over_many_slices(tmp_path: Path, chunk: int) -> None:
    text = "".join(f"7 Q0 doc{i} {i} {1000 - i} r\n" for i in range(300)) + "8 Q0 x 1 1 r"
    frames, slices = slices_of(write(tmp_path, "run", text), chunk)
    assert [f.height for f in frames] == [300, 1]
    assert slices.runid == "r"


def test_line_longer_than_a_slice(tmp_path: Path) -> None:
    long_doc = "d" * 5000
    text = f"1 Q0 {long_doc} 1 2 r\n1 Q0 b 2 1 r\n2 Q0 c 1 1 r\n"
    frames, _ = slices_of(write(tmp_path, "run", text), 100)
    assert rows(frames)[0][1] == long_doc
    assert len(rows(frames)) == 3


def test_last_topic_also_earlier_in_the_slice(tmp_path: Path) -> None:
    text = "1 Q0 a 1 3 r\n2 Q0 b 1 2 r\n1 Q0 c 2 1 r\n"
    frames, _ = slices_of(write(tmp_path, "run", text), 1 << 20)
    names = [f.get_column("qid").cast(pl.String).unique().to_list() for f in frames]
    assert names == [["2"], ["1"]]


@pytest.mark.parametrize(
    "text",
    [
        "1 Q0 a 1 3 r\n2 Q0 b 1 2 r\n1 Q0 c 2 1 r\n",  # topic 1 met again (slices of 1 line)
        "1  Q0 a 1 3 r\n",  # doubled separator
        " 1 Q0 a 1 3 r\n",  # separator opening a line
        "1 Q0 a 1\t3 r\n",  # a tab in a space-separated run
        "1 Q0 a 1 3 r\r2 Q0 b 1 2 r\n",  # a lone carriage return
        "# comment\n1 Q0 a 1 3 r\n",
        "1 Q0 a 1 3\n",  # a missing field
        "1 Q0 a 1 nan r\n",
        "1 Q0 a 1 x r\n",
    ],
)
def test_files_left_to_the_whole_file_readers(tmp_path: Path, text: str) -> None:
    with pytest.raises(NotStreamable):
        slices_of(write(tmp_path, "run", text), 14)


@pytest.mark.parametrize("chunk", [3, 1 << 20])
@pytest.mark.parametrize("text", [
    "1 Q0 a 1 3 r\r\n\n1 Q0 b 2 1 r\r\n\n2 Q0 c 1 1 s",  # blank lines, CRLF, no final newline
    # trec_eval ignores the rank field: any word there is read, as the whole file reads it.
    "1 Q0 a 1.5 3 r\n1 Q0 b - 1 r\n2 Q0 c 99999999999999999999 1 s\n",
])
def test_slices_read_what_the_whole_file_reads(tmp_path: Path, chunk: int, text: str) -> None:
    frames, slices = slices_of(write(tmp_path, "run", text), chunk)
    assert rows(frames) == [("1", "a", 3.0), ("1", "b", 1.0), ("2", "c", 1.0)]
    assert slices.runid == "s"


def test_tab_separated_run_with_padding(tmp_path: Path) -> None:
    text = "1\tQ0\ta\t1\t  2.5\tr\n1\tQ0\tb\t2\t  1.5\tr\n2\tQ0\tc\t1\t0.5\ts\n"
    frames, slices = slices_of(write(tmp_path, "run", text), 10)
    assert rows(frames) == [("1", "a", 2.5), ("1", "b", 1.5), ("2", "c", 0.5)]
    assert slices.runid == "s"


# ------------------------------------------------------------------------------------------
# Evaluation: streamed == whole file
# ------------------------------------------------------------------------------------------

OPTION_SETS = [
    Options(query_flag=True),
    Options(query_flag=True, all_queries=True),
    Options(query_flag=True, all_queries=True, max_retrieved=1),
    Options(query_flag=True, judged_only=True, rel_level=2),
    Options(query_flag=True, like_trec_eval_10=False),
    Options(summary_flag=True, num_docs=50),
]


@pytest.mark.parametrize("opts", OPTION_SETS)
@pytest.mark.parametrize("chunk", [1, 9, 40, 1 << 20])
def test_streamed_output_is_the_whole_file_output(tmp_path: Path, opts: Options,
                                                  chunk: int) -> None:
    qrels = write(tmp_path, "qrels", QRELS)
    run = write(tmp_path, "run", RUN + "q4 Q0 d1 1 1.0 sysB\n")
    specs = ["all_trec", "relstring.5", "gm_map", "num_q", "runid"]
    whole = render(qrels, run, specs, replace(opts, chunk_bytes=0))
    assert render(qrels, run, specs, replace(opts, chunk_bytes=chunk)) == whole
    assert "\tall\t" in whole


@pytest.mark.parametrize("opts", OPTION_SETS)
@pytest.mark.parametrize("chunk", [1, 40])
def test_grouped_runs_are_streamed(tmp_path: Path, opts: Options, chunk: int) -> None:
    """The comparisons above are not all fallbacks: a grouped run is evaluated slice by slice."""
    qrels = read_qrels(write(tmp_path, "qrels", QRELS), like_trec_eval=opts.like_trec_eval_10)
    run = write(tmp_path, "run", RUN + "q4 Q0 d1 1 1.0 sysB\n")
    streamed = evaluation._streamed(qrels, run, ["official"], replace(opts, chunk_bytes=chunk))
    assert streamed is not None
    assert streamed[0] == ("q1", "q2", "q3", "q4")


@pytest.mark.parametrize("chunk", [1, 16, 1 << 20])
def test_whitespace_only_lines_and_doubled_separators_after_the_runid(tmp_path: Path,
                                                                      chunk: int) -> None:
    qrels = write(tmp_path, "qrels", QRELS)
    run = write(tmp_path, "run", RUN.replace("sysA\n", "sysA  x \n   \n", 2) + " \n")
    opts = Options(query_flag=True, all_queries=True)
    whole = render(qrels, run, ["all_trec"], replace(opts, chunk_bytes=0))
    assert render(qrels, run, ["all_trec"], replace(opts, chunk_bytes=chunk)) == whole


@pytest.mark.parametrize(
    "run_text",
    [
        RUN,  # q4 of the qrels has no results: trec_eval 10.0 stops (exit 4)
        RUN + "q4 Q0 d1 1 1.0 s\nq4 Q0 d1 2 0.5 s\n",  # a document retrieved twice
        RUN + "q4 Q0 d1 1 nan s\n",
        "q9 Q0 d1 1 1.0 s\n",  # no topic in common
        RUN + "q1 Q0 d5 9 0.1 s\nq4 Q0 d1 1 1.0 s\n",  # q1 met again after other topics
        RUN + "q4 Q0 d1 first 1.0 s\nq4 Q0 d2 2.5 0.5 s\n",  # ranks that are not integers
    ],
)
@pytest.mark.parametrize("query_flag", [False, True])
def test_stops_and_errors_come_from_the_whole_file(tmp_path: Path, run_text: str,
                                                   query_flag: bool) -> None:
    qrels = write(tmp_path, "qrels", QRELS)
    run = write(tmp_path, "run", run_text)
    opts = Options(query_flag=query_flag)
    whole = render(qrels, run, ["official"], replace(opts, chunk_bytes=0))
    assert render(qrels, run, ["official"], replace(opts, chunk_bytes=12)) == whole


@pytest.mark.parity
@pytest.mark.skipif(not TREC_DATA.is_dir(),
                    reason=missing("trec_eval 10.0 test data", TREC_DATA))
@pytest.mark.parametrize("chunk", [50, 4096])
@pytest.mark.parametrize("flags", [{}, {"all_queries": True, "max_retrieved": 100}])
def test_trec_eval_test_data_streamed(chunk: int, flags: dict[str, object]) -> None:
    qrels, run = str(TREC_DATA / "qrels.test"), str(TREC_DATA / "results.test")
    opts = Options(query_flag=True, **flags)  # type: ignore[arg-type]
    whole = render(qrels, run, ["all_trec"], replace(opts, chunk_bytes=0))
    assert render(qrels, run, ["all_trec"], replace(opts, chunk_bytes=chunk)) == whole


@st.composite
def run_files(draw: st.DrawFn) -> tuple[str, str]:
    """A qrels and a run over a few topics: grouped or not, with ties and repeated scores."""
    topics = draw(st.lists(st.sampled_from(["1", "2", "10", "3a", "b"]), min_size=1,
                           max_size=4, unique=True))
    lines = []
    for qid in topics:
        docs = draw(st.lists(st.integers(0, 12), min_size=1, max_size=15, unique=True))
        lines += [(qid, f"d{d}", draw(st.sampled_from([0.5, 1.0, 1.25, 2.0]))) for d in docs]
    if draw(st.booleans()):
        lines = draw(st.permutations(lines))  # topics interleaved: no streaming
    run = "".join(f"{q} Q0 {d} {i} {s} tag\n" for i, (q, d, s) in enumerate(lines))
    judged = draw(st.lists(st.tuples(st.sampled_from(topics), st.integers(0, 12),
                                     st.integers(-1, 3)), min_size=1, max_size=25,
                           unique_by=lambda t: (t[0], t[1])))
    qrels = "".join(f"{q} 0 d{d} {g}\n" for q, d, g in judged)
    return qrels, run


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=run_files(), chunk=st.integers(1, 200), all_queries=st.booleans(),
       cut=st.sampled_from([None, 0, 2, 5]))
def test_streamed_equals_whole_hypothesis(tmp_path: Path, files: tuple[str, str], chunk: int,
                                          all_queries: bool, cut: int | None) -> None:
    qrels = write(tmp_path, "qrels", files[0])
    run = write(tmp_path, "run", files[1])
    opts = Options(query_flag=True, all_queries=all_queries, max_retrieved=cut)
    specs = ["official", "ndcg_cut.3", "P.2", "relstring.4"]
    whole = render(qrels, run, specs, replace(opts, chunk_bytes=0))
    assert render(qrels, run, specs, replace(opts, chunk_bytes=chunk)) == whole


@pytest.mark.parametrize("flags", [[], ["-c"]])
@pytest.mark.parametrize("content", ["", "\n\n"])
def test_a_run_without_results_is_refused_as_trec_eval_refuses_an_empty_one(
        tmp_path: Path, flags: list[str], content: str) -> None:
    """An empty run is an error (exit 2) with -c too; one of blank lines only, which trec_eval
    10.0 misreads, is the same clear error rather than a traceback."""
    from rageval.cli import main

    qrels = write(tmp_path, "qrels", "q1 0 d1 1\nq2 0 d2 1\n")
    run = write(tmp_path, "run", content)
    out = io.StringIO()
    assert main(["trec-eval", *flags, "-m", "map", qrels, run], stdout=out) == 2
    assert out.getvalue() == ""
