"""Byte-for-byte comparison of ``rageval trec-eval`` with trec_eval 10.0's reference outputs.

The reference files are trec_eval's own test data (its ``make quicktest`` expectations), found
as :mod:`trec_eval_paths` says (``python scripts/fetch_trec_eval.py`` fetches them).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trec_eval_paths import TEST_DIR as DATA
from trec_eval_paths import missing

from rageval.cli import trec_eval_command
from rageval.retrieval import trec_eval

pytestmark = [pytest.mark.parity,
              pytest.mark.skipif(not DATA.is_dir(),
                                 reason=missing("trec_eval 10.0 test data", DATA))]

# expected output file -> the trec_eval arguments that produced it
CASES = {
    "out.test": ["qrels.test", "results.test"],
    "out.test (qrels with comments)": ["qrels.test.with-comments", "results.test"],
    "out.comment.test": ["qrels.comment.test", "results.comment.test"],
    "out.test.a": ["-m", "all_trec", "qrels.test", "results.test"],
    "out.test.aq": ["-m", "all_trec", "-q", "qrels.test", "results.test"],
    "out.test.aqc": ["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"],
    "out.test.aqcM": ["-m", "all_trec", "-q", "-c", "-M100", "qrels.test", "results.trunc"],
    "out.test.aql": [
        "-m", "all_trec", "-mrelstring.20", "-q", "-l2", "qrels.rel_level", "results.test",
    ],
}


def run_main(args: list[str]) -> tuple[int, str]:
    argv = [str(DATA / a) if (DATA / a).is_file() else a for a in args]
    out = io.StringIO()
    status = trec_eval_command.main(argv, stdout=out)
    return status, out.getvalue()


def expected(name: str) -> bytes:
    return (DATA / name.split(" ")[0]).read_bytes()


@pytest.mark.parametrize("name", list(CASES))
def test_byte_identical(name: str) -> None:
    status, text = run_main(CASES[name])
    assert status == 0
    got = text.encode()
    want = expected(name)
    if got != want:
        got_lines, want_lines = got.splitlines(), want.splitlines()
        for i, (a, b) in enumerate(zip(got_lines, want_lines, strict=False)):
            assert a == b, f"{name}: first difference at line {i + 1}"
        assert len(got_lines) == len(want_lines), f"{name}: {len(got_lines)} lines"
    assert got == want


def lines_of(name: str, prefixes: tuple[str, ...], topic: str | None = None) -> list[str]:
    out = []
    for line in expected(name).decode().splitlines(keepends=True):
        measure, qid, _ = line.split("\t")
        if measure.strip().startswith(prefixes) and (topic is None or qid == topic):
            out.append(line)
    return out


@pytest.mark.parametrize(
    ("measure_args", "prefixes"),
    [
        (["-m", "P.5,10"], ("P_5 ", "P_10 ")),
        (["-mP.10,5"], ("P_5 ", "P_10 ")),
        (["-m", "ndcg_cut.10"], ("ndcg_cut_10 ",)),
        (["--measure=map_cut.100"], ("map_cut_100 ",)),
        (["-m", "recall.1000"], ("recall_1000 ",)),
        (["-m", "iprec_at_recall.0.5"], ("iprec_at_recall_0.50",)),
        (["-m", "Rprec_mult.1.2,0.2"], ("Rprec_mult_0.20", "Rprec_mult_1.20")),
        (["-m", "success.10"], ("success_10 ",)),
        (["-m", "unj.20"], ("unj_20 ",)),
        (["-m", "relative_P.200"], ("relative_P_200 ",)),
        (["-m", "map", "-m", "bpref"], ("map ", "bpref ")),
        (["-m", "set"], ("runid", "num_q", "num_ret", "num_rel ", "num_rel_ret", "utility",
                         "set_P", "set_recall", "set_relative_P", "set_map", "set_F")),
    ],
)
def test_single_measures_match_reference_lines(
    measure_args: list[str], prefixes: tuple[str, ...]
) -> None:
    """Each measure alone prints exactly its lines of the all_trec -q reference."""
    status, text = run_main([*measure_args, "-q", "qrels.test", "results.test"])
    assert status == 0
    want = lines_of("out.test.aq", tuple(p.rstrip() for p in prefixes))
    want = [ln for ln in want if any(ln.startswith(p) for p in prefixes)]
    assert text.splitlines(keepends=True) == want


def test_options_after_files_and_glued_values() -> None:
    """GNU getopt style: options may follow the files; -M/-l values may be glued."""
    status, text = run_main(
        ["qrels.test", "results.trunc", "-m", "all_trec", "-c", "-q", "-M", "100"]
    )
    assert status == 0
    assert text.encode() == expected("out.test.aqcM")


def test_nosummary_prints_only_topics() -> None:
    status, text = run_main(["-m", "all_trec", "-q", "-n", "qrels.test", "results.test"])
    assert status == 0
    want = [ln for ln in expected("out.test.aq").decode().splitlines(True) if "\tall\t" not in ln]
    assert text.splitlines(keepends=True) == want


def test_relstring_default_length() -> None:
    status, text = run_main(["-m", "relstring", "-q", "qrels.test", "results.test"])
    assert status == 0
    assert text.splitlines(keepends=True) == lines_of("out.test.aq", ("relstring",))


def test_evaluate_files_matches_printed_values() -> None:
    values = trec_eval.evaluate_files(
        DATA / "qrels.test", DATA / "results.test", ["official", "ndcg_cut.10"]
    )
    assert set(values) == {"301", "302", "303", "all"}
    assert f"{values['all']['map']:6.4f}" == "0.1785"
    assert f"{values['302']['P_10']:6.4f}" == "0.7000"
    assert values["all"]["num_q"] == 3
    assert values["all"]["num_ret"] == 1500
    assert "gm_map" in values["all"] and "gm_map" not in values["301"]
    assert "ndcg_cut_10" in values["303"]


def test_evaluate_files_options() -> None:
    values = trec_eval.evaluate_files(
        DATA / "qrels.test", DATA / "results.trunc", ["map"], all_queries=True, max_retrieved=100
    )
    assert values["302"]["map"] == 0.0
    values = trec_eval.evaluate_files(
        DATA / "qrels.rel_level", DATA / "results.test", ["num_rel"], rel_level=2
    )
    assert values["301"]["num_rel"] == 12


def test_unknown_measure_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status, text = run_main(["-m", "nope", "qrels.test", "results.test"])
    assert status == 1  # trec_eval's status for a command line it rejects
    assert text == ""
    assert "unknown measure 'nope'" in capsys.readouterr().err
    with pytest.raises(trec_eval.UsageError):
        trec_eval.evaluate_files(DATA / "qrels.test", DATA / "results.test", ["P_10"])


def test_bad_parameters_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    # trec_eval's statuses: 1 as it reads the command line, 2 as it sets the measure up, 4
    # where it cannot calculate it for the first topic.
    for spec, expected in (("P.0", 2), ("P.5,5", 2), ("P.", 1), ("ndcg.1", 2),
                           ("utility.1,2", 4)):
        status, _ = run_main(["-m", spec, "qrels.test", "results.test"])
        assert status == expected, spec
    assert "rageval: error:" in capsys.readouterr().err


def test_help_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    assert trec_eval_command.main(["-h", "-m", "ndcg"], stdout=out) == 0
    assert "usage: rageval trec-eval" in out.getvalue()
    assert "ndcg" in out.getvalue()
    assert trec_eval_command.main(["only-one-file"], stdout=io.StringIO()) == 1
    assert "expected QRELS and RUN" in capsys.readouterr().err


def test_run_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (DATA / "results.test").read_bytes()

    class FakeStdin:
        buffer = io.BytesIO(data)

    monkeypatch.setattr("sys.stdin", FakeStdin)
    out = io.StringIO()
    assert trec_eval_command.main([str(DATA / "qrels.test"), "-"], stdout=out) == 0
    assert out.getvalue().encode() == expected("out.test")
