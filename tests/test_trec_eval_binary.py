"""``rageval trec-eval`` against the real trec_eval 10.0, built from its release source: stdout
byte for byte and the exit status, on hand-made cases of the ways the two used to disagree and on
seeded generated qrels and runs.

The binary is built once per test run from ``trec_eval-10.0.tar.gz`` (``../shared/`` beside the
repository, or ``$RAGEVAL_TREC_EVAL_TARBALL``) with ``make``; without the tarball or a C compiler
the tests are skipped with the reason (with ``CI=true`` they fail instead: CI has both).
"""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from rageval.retrieval import trec_eval

TARBALL = Path(os.environ.get(
    "RAGEVAL_TREC_EVAL_TARBALL",
    Path(__file__).resolve().parents[2] / "shared" / "trec_eval-10.0.tar.gz"))


@pytest.fixture(scope="session")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [what for what, ok in ((str(TARBALL), TARBALL.is_file()),
                                     ("make", shutil.which("make") is not None),
                                     ("a C compiler (cc)", shutil.which("cc") is not None))
               if not ok]
    if missing:
        message = f"building trec_eval 10.0 needs {', '.join(missing)}"
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
        status = trec_eval.main(args, stdout=out)
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


@pytest.mark.parametrize("seed", range(150))
def test_generated_cases(binary: Path, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    qrels, run = generated(rng)
    if seed % 2:
        qrels, run = dressed(rng, qrels, run)
    names = [write(tmp_path, "qrels", qrels), write(tmp_path, "run", run)]
    for flags in FLAG_SETS:
        real, ours = both(binary, [*flags, *names], tmp_path)
        assert ours == real, f"flags {flags}\nqrels {qrels}\nrun {run}"
