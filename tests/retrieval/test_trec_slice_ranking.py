"""The ranking of a slice in file order (trec_eval.slice_ranking) held to the general one.

For runs written topic by topic in rank order, with many tied scores, judged and unjudged
documents among the ties and negative grades, every topic's ranked grades, scores, judged
marks and judgments must be those of :meth:`Ranking.from_trec`; whatever is not that case
must be refused (None), and a document listed twice must be reported as the general ranking
reports it.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from rageval.retrieval.ranking import Ranking
from rageval.retrieval.ranking.trec_grades import DuplicateDocument
from rageval.retrieval.trec import read_qrels
from rageval.retrieval.trec.fast_read import run_slice
from rageval.retrieval.trec.frames import Run
from rageval.retrieval.trec_eval.slice_ranking import _MAX_TIE_PAIRS, ranked_slice
from rageval.retrieval.trec_eval.streaming import _JudgmentsByTopic


def _files(tmp_path: Path, seed: int, topics: int = 12) -> tuple[str, str]:
    rng = random.Random(seed)
    run_lines, qrels_lines = [], []
    for t in range(topics):
        qid = f"q{rng.randrange(1000)}x{t}"
        docs = rng.sample(range(500), rng.randrange(1, 60))
        scores = sorted((rng.randrange(6) / 4 for _ in docs), reverse=True)  # many ties
        run_lines += [f"{qid} Q0 d{d} {r} {s} sys"
                      for r, (d, s) in enumerate(zip(docs, scores, strict=True))]
        judged = [*rng.sample(docs, min(len(docs), rng.randrange(0, 8))), 9999]
        qrels_lines += [f"{qid} 0 d{d} {rng.choice([-1, 0, 1, 2, 3])}" for d in judged]
    rng.shuffle(qrels_lines)
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("".join(f"{line}\n" for line in qrels_lines))
    run.write_text("".join(f"{line}\n" for line in run_lines))
    return str(qrels), str(run)


def _whole_run(path: str) -> Run:
    """The file read as one slice (as the slices are read)."""
    parsed = run_slice(Path(path).read_bytes(), " ")
    assert parsed is not None
    return Run(parsed[0], "", path)


def _by_topic(ranking: Ranking) -> dict[str, tuple[list[int], list[float], list[bool], list[int]]]:
    out = {}
    for i, qid in enumerate(ranking.qids):
        a, b = ranking.offsets[i], ranking.offsets[i + 1]
        ja, jb = ranking.judged_offsets[i], ranking.judged_offsets[i + 1]
        assert ranking.scores is not None
        out[qid] = (ranking.te_rel()[a:b].tolist(), ranking.scores[a:b].tolist(),
                    ranking.pooled[a:b].tolist(), ranking.judged_grades[ja:jb].tolist())
    return out


@pytest.mark.parametrize("seed", range(12))
def test_a_slice_ranked_in_file_order_is_the_general_ranking(tmp_path: Path, seed: int) -> None:
    qrels_path, run_path = _files(tmp_path, seed)
    qrels = read_qrels(qrels_path, like_trec_eval=True)
    run = _whole_run(run_path)
    fast = ranked_slice(run, _JudgmentsByTopic(qrels).in_order(run), None)
    assert fast is not None
    assert sorted(fast.qids) == sorted(run.qid_layout().names)
    general = Ranking.from_trec(qrels, run)
    assert _by_topic(fast) == _by_topic(general)


def test_what_is_not_the_common_case_is_left_to_the_general_ranking(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("a 0 d1 1\nb 0 d2 1\n")
    judgments = _JudgmentsByTopic(read_qrels(str(qrels), like_trec_eval=True))

    def ranked(text: str, max_retrieved: int | None = None) -> Ranking | None:
        run = tmp_path / "run"
        run.write_text(text)
        slice_run = _whole_run(str(run))
        return ranked_slice(slice_run, judgments.in_order(slice_run), max_retrieved)

    assert ranked("a Q0 d1 1 2.0 r\na Q0 d3 2 1.0 r\nb Q0 d2 1 1.0 r\n") is not None
    assert ranked("a Q0 d1 1 1.0 r\na Q0 d3 2 2.0 r\n") is None  # not in rank order
    assert ranked("a Q0 d1 1 2.0 r\nb Q0 d2 1 1.0 r\na Q0 d3 2 1.0 r\n") is None  # two blocks
    assert ranked("a Q0 d1 1 2.0 r\na Q0 d3 2 1.0 r\n", max_retrieved=1) is None  # -M cuts
    assert ranked("a Q0 d1 1 2.0 r\na Q0 d3 2 1.0 r\n", max_retrieved=2) is not None
    many = "".join(f"a Q0 e{i} {i} 1.0 r\n" for i in range(_MAX_TIE_PAIRS // 2 + 1))
    assert ranked(many + "a Q0 d1 1 1.0 r\n") is None  # a tie too long for pairwise ranks


def test_a_document_listed_twice_is_reported_as_the_general_ranking_does(
        tmp_path: Path) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("b 0 d1 1\na 0 d2 1\n")
    run.write_text("b Q0 d1 1 2.0 r\nb Q0 d1 2 1.0 r\na Q0 d2 1 1.0 r\na Q0 d2 2 0.5 r\n")
    judged = read_qrels(str(qrels), like_trec_eval=True)
    slice_run = _whole_run(str(run))
    with pytest.raises(DuplicateDocument) as fast:
        ranked_slice(slice_run, _JudgmentsByTopic(judged).in_order(slice_run), None)
    with pytest.raises(DuplicateDocument) as general:
        Ranking.from_trec(judged, _whole_run(str(run)))
    assert str(fast.value) == str(general.value)
    assert fast.value.qid == "a"  # the first topic trec_eval meets, in strcmp order


def test_ties_across_judged_documents_follow_docno_descending(tmp_path: Path) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("t 0 d1 3\nt 0 d4 1\nt 0 d9 -1\n")
    # All tied: trec_eval ranks d9 d5 d4 d2 d1 (docno descending).
    run.write_text("t Q0 d1 1 1.0 r\nt Q0 d2 2 1.0 r\nt Q0 d9 3 1.0 r\nt Q0 d4 4 1.0 r\n"
                   "t Q0 d5 5 1.0 r\nt Q0 d0 6 0.5 r\n")
    judged = read_qrels(str(qrels), like_trec_eval=True)
    slice_run = _whole_run(str(run))
    fast = ranked_slice(slice_run, _JudgmentsByTopic(judged).in_order(slice_run), None)
    assert fast is not None
    assert fast.te_rel().tolist() == [-2, -1, 1, -1, 3, -1]
    assert np.array_equal(fast.pooled, [True, False, True, False, True, False])
