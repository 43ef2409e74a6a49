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


# The flags whose every combination with generated input must agree (-c with -l other than 1
# and -l -1 are classes still being closed).
FLAG_SETS = [[], ["-q"], ["-c", "-q"], ["-m", "all_trec", "-q"], ["-m", "all_trec", "-c"],
             ["-M", "3", "-q"], ["-l", "2", "-q"], ["-m", "all_trec", "-l", "2"],
             ["-J", "-q", "-m", "all_trec"], ["-J", "-c", "-m", "all_trec"]]


@pytest.mark.parametrize("seed", range(150))
def test_generated_cases(binary: Path, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    qrels, run = generated(rng)
    names = [write(tmp_path, "qrels", qrels), write(tmp_path, "run", run)]
    for flags in FLAG_SETS:
        real, ours = both(binary, [*flags, *names], tmp_path)
        assert ours == real, f"flags {flags}\nqrels {qrels}\nrun {run}"
