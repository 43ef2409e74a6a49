"""``rageval trec-eval`` against the real trec_eval 10.0, built from its release source: stdout
byte for byte and the exit status, on hand-made cases of the ways the two used to disagree and on
seeded generated qrels and runs.

The binary is built once per test run from ``trec_eval-10.0.tar.gz`` (found as
:mod:`trec_eval_paths` says; ``python scripts/fetch_trec_eval.py`` fetches it) with ``make``;
without the tarball or a C compiler the tests are skipped with the reason, naming the command
(with ``CI=true`` they fail instead: CI has both).
"""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rageval.cli import trec_eval_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trec_eval_paths import FETCH, TARBALL, missing
from trec_eval_paths import TEST_DIR as TEST_DATA

# Every test here compares rageval with the reference implementation.
pytestmark = pytest.mark.parity


@pytest.fixture(scope="session")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing_parts = [what for what, ok in ((str(TARBALL), TARBALL.is_file()),
                                           ("make", shutil.which("make") is not None),
                                           ("a C compiler (cc)", shutil.which("cc") is not None))
                     if not ok]
    if missing_parts:
        message = f"building trec_eval 10.0 needs {', '.join(missing_parts)}"
        if not TARBALL.is_file():
            message += f": run `{FETCH}` to fetch it (checked)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("trec_eval_build")
    with tarfile.open(TARBALL) as tar:
        tar.extractall(root, filter="data")
    (source,) = [p.parent for p in root.rglob("Makefile")]
    subprocess.run(["make", "-s"], cwd=source, check=True, capture_output=True)
    return source / "trec_eval"


def both(binary: Path, args: list[str], cwd: Path) -> tuple[tuple[bytes, int], tuple[bytes, int]]:
    """(stdout, exit status) of trec_eval and of ``rageval trec-eval`` on the same arguments."""
    real = subprocess.run([str(binary), *args], cwd=cwd, capture_output=True)
    out = io.StringIO()
    here = Path.cwd()
    os.chdir(cwd)
    try:
        status = trec_eval_command.main(args, stdout=out)
    finally:
        os.chdir(here)
    return (real.stdout, real.returncode), (out.getvalue().encode(), status)


def write(directory: Path, name: str, lines: list[str]) -> str:
    (directory / name).write_text("".join(f"{line}\n" for line in lines))
    return name


QRELS = ["1 0 d1 1", "1 0 d2 0", "1 0 d4 2", "2 0 d3 1", "3 0 d5 1", "3 0 d6 0"]
RUN = ["1 Q0 d1 1 2.0 r", "1 Q0 d2 2 1.0 r", "1 Q0 d9 3 0.5 r", "2 Q0 d3 1 1.0 r"]
DUPLICATE = [*RUN, "2 Q0 d3 2 0.5 r", "3 Q0 d5 1 1.0 r"]
CASES = {
    "a qrels topic without results": (QRELS, RUN, []),
    "... with -q: the topics before it are printed": (QRELS, RUN, ["-q"]),
    "... with -c it is scored": (QRELS, RUN, ["-c", "-q"]),
    "... with -m all_trec and -J": (QRELS, RUN, ["-m", "all_trec", "-J", "-q"]),
    "a document retrieved twice": (QRELS, DUPLICATE, []),
    "... with -q": (QRELS, DUPLICATE, ["-q", "-c"]),
    "... in a topic without qrels: unnoticed": (QRELS[:2], [*RUN, "9 Q0 x 1 1 r",
                                                             "9 Q0 x 2 0 r"], ["-q"]),
    "... after a topic -c scores empty": (["1 0 a 1", "2 0 b 1"], ["2 Q0 b 1 1 r",
                                                                  "2 Q0 b 2 0 r"], ["-c", "-q"]),
    "a document judged twice": (["1 0 d1 1", "1 0 d1 0", "2 0 d3 1"], RUN, ["-q"]),
    "the first topic evaluated judges everything below 0": (["1 0 d1 -1", "2 0 d3 1"], RUN,
                                                            ["-q"]),
    "... a later one is scored": (["1 0 d1 1", "2 0 d3 -1"], RUN, ["-q"]),
    "no topic in common": (["7 0 d1 1"], RUN, []),
    "-J, a topic whose results are all unjudged": (QRELS[:4], [*RUN, "2 Q0 x 2 0.1 r"],
                                                   ["-J", "-q", "-m", "all_trec"]),
    "-J and -c: the stand-in of an added topic dropped too": (QRELS, RUN,
                                                              ["-J", "-c", "-q", "-m", "all_trec"]),
    "-M 0: nothing retrieved anywhere": (QRELS[:4], RUN, ["-M", "0", "-q"]),
    "-c -l 2: the summary num_rel counts every grade above 0": (
        [*QRELS, "5 0 x 1", "5 0 y 2"], RUN, ["-c", "-l", "2", "-q", "-m", "all_trec"]),
    "-l -1: unjudged results pass the level, num_rel_ret does not count them": (
        QRELS, [*RUN, "1 Q0 u1 4 0.2 r", "2 Q0 u2 2 3.0 r", "3 Q0 d5 1 1 r"],
        ["-l", "-1", "-q", "-m", "all_trec"]),
    "-l -1 -c: the stand-in of an added topic passes the level": (
        [*QRELS, "6 0 z 0"], RUN, ["-c", "-l", "-1", "-q", "-m", "all_trec"]),
    "-l -1: a topic without a grade >= 0 divides by num_rel 0 (inf)": (
        ["1 0 d1 -1", "1 0 d2 1", "2 0 d3 -1"], ["1 Q0 d1 1 1 r", "2 Q0 d3 1 1 r",
                                                  "2 Q0 u 2 0.5 r"], ["-l", "-1", "-q"]),
    "a tab-separated run with an empty field (two tabs)": (
        QRELS[:4], ["1\tQ0\td1\t1\t2.0\tr", "1\tQ0\td2\t\t5\t0.5\tr",
                    "1\tQ0\td9\t3\t1.0\tr", "2\tQ0\td3\t1\t1.0\tr"], ["-q"]),
    "scores C's atof reads: hex, trailing characters, none": (
        QRELS[:4], ["1 Q0 d1 1 0x1p-1 r", "1 Q0 d2 2 12abc r", "1 Q0 d9 3 x r",
                    "2 Q0 d3 1 1e0 r"], ["-q"]),
    "grades C's atol reads": (["1 0 d1 1x", "1 0 d2 2.5", "2 0 d3 +1"], RUN, ["-q"]),
    "a blank qrels line": (["1 0 d1 1", "", "2 0 d3 1"], RUN, []),
    "a comment line in qrels": (["# judged by hand", "1 0 d1 1", "# more", "2 0 d3 1"], RUN,
                                ["-q"]),
    "two comment lines in a row: the second is read as a judgment": (
        ["# judged by hand", "# by two people", *QRELS[:4]], RUN, []),
    "blank, comment and indented lines in a run": (
        QRELS[:4], ["", "# run r", *RUN[:2], "   ", "  # note", *RUN[2:]], ["-q"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_made_cases(binary: Path, tmp_path: Path, case: str) -> None:
    qrels, run, flags = CASES[case]
    args = [*flags, write(tmp_path, "qrels", qrels), write(tmp_path, "run", run)]
    real, ours = both(binary, args, tmp_path)
    assert ours == real


# Cases with more files: (files by name, arguments; QRELS and RUN are the defaults above).
FILE_CASES = {
    "-Z: a measure sorting past a topic's lines meets the next topic's first": (
        {"z": ["1 map 0.5 0.25", "2 num_ret 1 0.5", "2 map 0 1", "~~ ~ 0 1"]},
        ["-q", "-Z", "z", "-m", "map", "-m", "num_ret", "-m", "gm_map"]),
    "-Z: a stddev of 0, equal and unequal": (
        {"z": ["1 P_5 0.4 0", "1 P_10 0.5 0", "2 P_5 0.2 0", "~~ ~ 0 1"]},
        ["-q", "-Z", "z", "-m", "P.5,10", "-m", "runid", "-m", "num_q"]),
    "-Z: a malformed file (exit 255)": ({"z": ["1 map 0.5"]}, ["-Z", "z"]),
    "-Z with -c": ({"z": ["1 map 0.5 0.25", "3 map 0 1", "~~ ~ 0 1"]},
                   ["-c", "-q", "-Z", "z", "-m", "official", "-m", "relstring"]),
    "-R qrels_jg: groups averaged, one group alone": (
        {"jg": ["1 a d1 1", "1 b d1 0", "1 b d2 2", "2 x d3 1", "3 a d5 1", "3 b d5 0"]},
        ["-q", "-c", "-R", "qrels_jg", "-m", "qrels_jg"]),
    "-R qrels_jg with a measure of plain qrels (exit 4)": (
        {"jg": ["1 a d1 1", "2 a d3 1"]}, ["-R", "qrels_jg", "-m", "map"]),
    "-m P_avgjg with plain qrels (exit 4)": ({}, ["-c", "-m", "P_avgjg"]),
    "-R qrels_jg: a document judged twice in one group (exit 2)": (
        {"jg": ["1 a d1 1", "1 a d1 0", "2 a d3 1"]}, ["-R", "qrels_jg", "-m", "qrels_jg"]),
    "-c -D: the summary averages over every qrels topic": ({}, ["-c", "-D", "1.2", "-q"]),
    "-D naming a topic the qrels lack (exit 7)": ({}, ["-D", "1.9"]),
}


@pytest.mark.parametrize("case", list(FILE_CASES))
def test_cases_with_more_files(binary: Path, tmp_path: Path, case: str) -> None:
    files, flags = FILE_CASES[case]
    for name, lines in files.items():
        write(tmp_path, name, lines)
    qrels = "jg" if "jg" in files else write(tmp_path, "qrels", QRELS)
    real, ours = both(binary, [*flags, qrels, write(tmp_path, "run", RUN)], tmp_path)
    assert ours == real


def test_what_trec_eval_crashes_on_is_refused(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A negative -M, and a -Z file listing a (topic, measure) twice (which line trec_eval
    uses depends on its C library's sort): refused, exit 2, nothing on stdout."""
    files = [str(tmp_path / write(tmp_path, name, lines))
             for name, lines in (("qrels", QRELS[:4]), ("run", RUN))]
    zscores = str(tmp_path / write(tmp_path, "z", ["1 map 0.5 0.25", "1 map 0.4 0.1", "~~ ~ 0 1"]))
    for args, message in ((["-M", "-1"], "non-negative"), (["-Z", zscores], "listed twice")):
        out = io.StringIO()
        assert trec_eval_command.main([*args, *files], stdout=out) == 2
        assert out.getvalue() == "" and message in capsys.readouterr().err


def test_preference_formats_are_refused_clearly(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    args = ["-R", "prefs", write(tmp_path, "qrels", QRELS), write(tmp_path, "run", RUN)]
    assert trec_eval_command.main(args, stdout=io.StringIO()) == 2
    assert "-R prefs (preference judgments) is not supported" in capsys.readouterr().err


def generated(rng: random.Random) -> tuple[list[str], list[str]]:
    """Qrels and a run over a few topics: graded and negative labels, unjudged and duplicate
    documents, ties, topics on one side only, comment-free space-separated lines."""
    topics = [str(rng.randrange(1, 40)) for _ in range(rng.randrange(1, 6))]
    qrels, run = [], []
    for topic in dict.fromkeys(topics):
        docs = [f"d{rng.randrange(30)}" for _ in range(rng.randrange(1, 12))]
        side = rng.random()
        if side > 0.15:  # a qrels topic
            for doc in dict.fromkeys(docs):
                if rng.random() < 0.7:
                    qrels.append(f"{topic} 0 {doc} {rng.choice([-1, 0, 0, 1, 1, 2, 3])}")
        if side < 0.9:  # a run topic
            listed = list(dict.fromkeys(docs))
            if rng.random() < 0.05 and listed:
                listed.append(listed[0])  # a duplicate
            for rank, doc in enumerate(listed, 1):
                score = rng.choice([1.0, 2.0, round(rng.uniform(0, 5), 2)])
                run.append(f"{topic} Q0 {doc} {rank} {score} sys")
    if not qrels:
        qrels.append("1 0 d0 1")
    if not run:
        run.append("1 Q0 d0 1 1.0 sys")
    return qrels, run


# Spellings of a score that C's atof reads as the same number, and tokens it reads otherwise.
def _score_spelling(rng: random.Random, token: str) -> str:
    value = float(token)
    return rng.choice([f"{value.hex()}", f"{token}abc", f"{value * 10:g}e-1", f"+{token}",
                       f"{token}e0x", "nonsense", "inf", "-inf", token])


def dressed(rng: random.Random, qrels: list[str], run: list[str]) -> tuple[list[str], list[str]]:
    """The same judgments and results as trec_eval reads them, written the ways real files are:
    single tabs, runs of mixed whitespace (two tabs in a row among them), leading and trailing
    whitespace, CRLF ends, blank and comment lines in runs, a comment line in column 0 in qrels,
    scores and grades spelled as C reads them (hex, trailing characters, no number at all)."""
    style = rng.choice(["space", "tab", "mixed", "mixed"])

    def join(fields: list[str]) -> str:
        if style == "space":
            return " ".join(fields)
        if style == "tab":
            return "\t".join(fields)
        gaps = [rng.choice([" ", "\t", "\t\t", "  ", " \t "]) for _ in fields[1:]]
        text = fields[0] + "".join(g + f for g, f in zip(gaps, fields[1:], strict=True))
        return rng.choice(["", " ", "\t"]) + text + rng.choice(["", " ", "\t", "\r"])

    out_run: list[str] = []
    for line in run:
        fields = line.split()
        if rng.random() < 0.15:
            fields[4] = _score_spelling(rng, fields[4])
        if style == "mixed" and rng.random() < 0.05:
            out_run.append(rng.choice(["", "  ", "# a comment", "  # indented comment 1 2 3"]))
        out_run.append(join(fields))
    out_qrels: list[str] = []
    for i, line in enumerate(qrels):
        fields = line.split()
        if rng.random() < 0.03:
            fields[3] = rng.choice([f"{fields[3]}x", f"+{fields[3]}", f"{fields[3]}.7"])
        if style == "mixed" and i and rng.random() < 0.05:
            out_qrels.append("# a comment")  # never two in a row, never last
        out_qrels.append(join(fields))
    return out_qrels, out_run


# The flags each generated case is run with.
FLAG_SETS = [[], ["-q"], ["-c", "-q"], ["-m", "all_trec", "-q"], ["-m", "all_trec", "-c"],
             ["-M", "3", "-q"], ["-l", "2", "-q"], ["-m", "all_trec", "-l", "2"],
             ["-J", "-q", "-m", "all_trec"], ["-J", "-c", "-m", "all_trec"],
             ["-c", "-l", "2", "-q", "-m", "all_trec"], ["-l", "-1", "-q", "-m", "all_trec"],
             ["-c", "-l", "-1", "-m", "all_trec"], ["-l", "0", "-c", "-M", "2", "-m", "all_trec"]]


def judgment_groups(rng: random.Random, qrels: list[str]) -> list[str]:
    """A -R qrels_jg file from qrels: each judgment in one to three groups, its grade varied."""
    lines = []
    for line in qrels:
        qid, _, docno, rel = line.split()
        for group in rng.sample(["a", "b", "c"], rng.randrange(1, 4)):
            grade = rel if rng.random() < 0.6 else rng.choice(["-1", "0", "1", "2"])
            lines.append(f"{qid} {group} {docno} {grade}")
    rng.shuffle(lines)
    return lines


_ZSCORED = ["num_ret", "num_rel", "map", "gm_map", "Rprec", "P_5", "P_10", "recall_5",
            "iprec_at_recall_0.00", "ndcg", "bpref", "recip_rank", "num_rel_ret"]


def zscore_lines(rng: random.Random, qrels: list[str]) -> list[str]:
    """A -Z file: means and stddevs (some 0) for some measures of some topics, and a last
    topic sorting after every real one (trec_eval reads past its table otherwise)."""
    lines = []
    for qid in dict.fromkeys(line.split()[0] for line in qrels):
        if rng.random() < 0.8:
            for name in rng.sample(_ZSCORED, rng.randrange(1, len(_ZSCORED))):
                mean = rng.choice([0.0, 0.25, 0.5, 1.0, 2.0, round(rng.random(), 3)])
                stddev = rng.choice([0.0, 0.1, 0.5, 1.0, round(rng.random(), 3)])
                lines.append(f"{qid} {name} {mean} {stddev}")
    lines.append("~~ ~ 0 1")
    return lines


# -R qrels_jg and -Z, on the generated qrels turned into judgment groups and z-score files.
GROUP_FLAG_SETS = [["-R", "qrels_jg", "-m", "qrels_jg", "-q"],
                   ["-R", "qrels_jg", "-m", "qrels_jg", "-c", "-J", "-q"],
                   ["-R", "qrels_jg", "-m", "P_avgjg.1,3", "-l", "2", "-M", "3", "-q"],
                   ["-R", "qrels_jg", "-q"]]
ZSCORE_FLAG_SETS = [["-Z", "zscores", "-q", "-m", "all_trec"],
                    ["-Z", "zscores", "-c", "-q"]]


@pytest.mark.parametrize("seed", range(150))
def test_generated_cases(binary: Path, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    qrels, run = generated(rng)
    groups, zscores = judgment_groups(rng, qrels), zscore_lines(rng, qrels)
    if seed % 2:
        qrels, run = dressed(rng, qrels, run)
    names = [write(tmp_path, "qrels", qrels), write(tmp_path, "run", run)]
    write(tmp_path, "zscores", zscores)
    jg_names = [write(tmp_path, "groups", groups), names[1]]
    cases = [(flags, names) for flags in [*FLAG_SETS, *ZSCORE_FLAG_SETS]]
    cases += [(flags, jg_names) for flags in GROUP_FLAG_SETS]
    for flags, files in cases:
        real, ours = both(binary, [*flags, *files], tmp_path)
        assert ours == real, f"flags {flags}\nqrels {qrels}\nrun {run}"


DATA_PAIRS = [("qrels.test", "results.test"), ("qrels.rel_level", "results.test"),
              ("qrels.comment.test", "results.comment.test"),
              ("qrels.test.with-comments", "results.test"), ("qrels.test", "results.trunc")]
DATA_FLAG_SETS = [[*q, *c, *lvl, "-m", "all_trec"]
                  for q in ([], ["-q"]) for c in ([], ["-c"])
                  for lvl in ([], ["-l", "0"], ["-l", "2"], ["-l", "-1"])]
DATA_FLAG_SETS += [["-J", "-c", "-q", "-m", "all_trec"], ["-M", "5", "-q", "-m", "all_trec"],
                   ["-m", "set", "-N", "1000", "-q"], ["-R", "qrels", "-m", "qrels_jg"]]


@pytest.mark.parametrize("pair", DATA_PAIRS, ids=lambda p: f"{p[0]}+{p[1]}")
def test_trec_eval_test_data(binary: Path, pair: tuple[str, str]) -> None:
    """trec_eval's own test files under every flag set above."""
    if not TEST_DATA.is_dir():
        message = missing("trec_eval 10.0 test data", TEST_DATA)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    for flags in DATA_FLAG_SETS:
        real, ours = both(binary, [*flags, *pair], TEST_DATA)
        assert ours == real, f"flags {flags}"


# Command lines trec_eval accepts or rejects (exit 1 before reading, 2 for a file or a
# parameter, 255 for a -Z file): Q and R stand for the qrels and the run.
COMMAND_LINES = ["", "-x Q R", "-m nonsense Q R", "-m P. Q R", "Q", "-m P.0 Q R",
                 "-m P.5,5 Q R", "-m P.x Q R", "-m ndcg.1 Q R", "-m map.5 -m official.5 Q R",
                 "Q missing", "missing R", "-T other Q R", "-R bogus Q R", "-l x Q R",
                 "-N 10x -m utility Q R", "-M 2x -q Q R", "-Z missing Q R",
                 "-m utility.1,2 -q Q R",
                 "--query_eval_wanted --measure=P.3 --level_for_rel=2 Q R"]


@pytest.mark.parametrize("line", COMMAND_LINES)
def test_command_lines(binary: Path, tmp_path: Path, line: str) -> None:
    files = {"Q": write(tmp_path, "qrels", QRELS[:4]), "R": write(tmp_path, "run", RUN)}
    args = [files.get(word, word) for word in line.split()]
    real, ours = both(binary, args, tmp_path)
    assert ours == real
