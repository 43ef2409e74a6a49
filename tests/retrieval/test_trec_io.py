"""TREC qrels/run readers and writer: layouts, comments, errors with file and line."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from rageval.core.errors import InputError
from rageval.retrieval.ranking import Ranking
from rageval.retrieval.trec import Run, read_qrels, read_run, write_run


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def run_rows(run: Run) -> list[tuple[str, str, float]]:
    f = run.frame
    return list(
        zip(
            f.get_column("qid").cast(pl.String).to_list(),
            f.get_column("docno").to_list(),
            f.get_column("score").to_list(),
            strict=True,
        )
    )


# ------------------------------------------------------------------------------------------
# Layouts
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "1 Q0 a 1 2.5 runA\n1 Q0 b 2 1.5 runA\n2 Q0 c 1 0.5 runB\n",
        "1\tQ0\ta\t1\t2.5\trunA\n1\tQ0\tb\t2\t1.5\trunA\n2\tQ0\tc\t1\t0.5\trunB\n",
        "1\tQ0\ta\t1\t  2.5\trunA\n1\tQ0\tb\t2\t  1.5\trunA\n2\tQ0\tc\t1 0.5  runB\n",
        "  1   Q0 a 1 2.5 runA\n1 Q0\tb 2 1.5e0 runA extra fields\n\n2 Q0 c 1 .5 runB\n",
        "1 Q0 a 1 2.5 runA\r\n1 Q0 b 2 1.5 runA\r\n2 Q0 c 1 0.5 runB\r\n",
        "# a comment\n1 Q0 a 1 2.5 runA\n   # indented comment\n1 Q0 b 2 1.5 runA\n"
        "2 Q0 c 1 0.5 runB",
    ],
    ids=["spaces", "tabs", "padded-tabs", "mixed", "crlf", "comments-no-final-newline"],
)
def test_run_layouts(tmp_path: Path, text: str) -> None:
    run = read_run(write(tmp_path, "run", text))
    assert run_rows(run) == [("1", "a", 2.5), ("1", "b", 1.5), ("2", "c", 0.5)]
    assert run.runid == "runB"  # the last line's runid, as trec_eval


@pytest.mark.parametrize(
    "text",
    [
        "1 0 a 1\n1 0 b 0\n2 0 c 2\n",
        "1\t0\ta\t1\n1\t0\tb\t0\n2\t0\tc\t2\n",
        "# header\n1 0 a 1\n# note\n# two comment lines in a row\n1 0 b 0\n\n2  0\tc 2 \n",
        "1 0 a 1\r\n1 0 b 0\r\n2 0 c 2\r\n",
    ],
    ids=["spaces", "tabs", "comments-mixed", "crlf"],
)
def test_qrels_layouts(tmp_path: Path, text: str) -> None:
    qrels = read_qrels(write(tmp_path, "qrels", text))
    assert qrels.to_dict() == {"1": {"a": 1, "b": 0}, "2": {"c": 2}}
    assert qrels.qids() == ["1", "2"]


def test_hash_inside_ids_is_not_a_comment(tmp_path: Path) -> None:
    qrels = read_qrels(write(tmp_path, "q", "1 0 doc#1 1\n"))
    run = read_run(write(tmp_path, "r", "1 Q0 doc#1 1 1.0 r#1\n"))
    assert qrels.to_dict() == {"1": {"doc#1": 1}}
    assert run_rows(run) == [("1", "doc#1", 1.0)] and run.runid == "r#1"


def test_negative_and_signed_grades(tmp_path: Path) -> None:
    qrels = read_qrels(write(tmp_path, "q", "1 0 a -1\n1 0 b +2\n1 0 c -2\n"))
    assert qrels.to_dict() == {"1": {"a": -1, "b": 2, "c": -2}}


def test_scores_are_float64(tmp_path: Path) -> None:
    run = read_run(write(tmp_path, "r", "1 Q0 a 1 0.1000000000000000055511151231257827 x\n"))
    assert run.frame.get_column("score").dtype == pl.Float64
    assert run_rows(run)[0][2] == 0.1
    run = read_run(write(tmp_path, "r2", "1 Q0 a 1 1.00000001 x\n1 Q0 b 2 1.00000002 x\n"))
    assert run_rows(run)[0][2] != run_rows(run)[1][2]  # equal in single precision


def test_tab_inside_a_field_is_split_like_trec_eval(tmp_path: Path) -> None:
    # trec_eval splits on any whitespace, so this line has fields 1 Q0 d x 1 2.0 ...
    run = read_run(write(tmp_path, "r", "1 Q0 d\tx 1 2.0 run\n"))
    assert run_rows(run) == [("1", "d", 1.0)]
    assert run.runid == "2.0"


# ------------------------------------------------------------------------------------------
# Errors name the file and the line
# ------------------------------------------------------------------------------------------


def error_of(fn: Callable[[Path], object], path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        fn(path)
    err = info.value
    assert err.path == str(path)
    assert str(path) in str(err)
    return err


def test_qrels_wrong_field_count(tmp_path: Path) -> None:
    path = write(tmp_path, "q", "1 0 a 1\n# c\n1 0 b\n")
    err = error_of(read_qrels, path)
    assert err.line == 3 and "line 3" in str(err) and "4 fields" in err.message


def test_qrels_extra_field(tmp_path: Path) -> None:
    err = error_of(read_qrels, write(tmp_path, "q", "1 0 a 1\n1 0 b 1 junk\n"))
    assert err.line == 2


def test_qrels_grade_not_an_integer(tmp_path: Path) -> None:
    err = error_of(read_qrels, write(tmp_path, "q", "1 0 a 1\n\n1 0 b 1.5\n"))
    assert err.line == 3 and err.field == "rel" and "'1.5'" in err.message


def test_run_too_few_fields(tmp_path: Path) -> None:
    err = error_of(read_run, write(tmp_path, "r", "1 Q0 a 1 2.0 x\n1 Q0 b 2 1.0\n"))
    assert err.line == 2 and err.field == "runid" and "6 fields" in err.message


def test_run_bad_score(tmp_path: Path) -> None:
    err = error_of(read_run, write(tmp_path, "r", "# c\n1 Q0 a 1 2.0 x\n1 Q0 b 2 high x\n"))
    assert err.line == 3 and err.field == "score" and "'high'" in err.message


def test_run_nan_score(tmp_path: Path) -> None:
    err = error_of(read_run, write(tmp_path, "r", "1 Q0 a 1 nan x\n"))
    assert err.line == 1 and err.field == "score"


def test_empty_and_missing_files(tmp_path: Path) -> None:
    error_of(read_run, write(tmp_path, "empty", ""))
    error_of(read_qrels, write(tmp_path, "comments", "# only a comment\n\n"))
    missing = tmp_path / "missing"
    with pytest.raises(InputError, match="file not found"):
        read_run(missing)


def test_duplicate_document_in_run(tmp_path: Path) -> None:
    qrels = write(tmp_path, "q", "1 0 a 1\n")
    run = write(tmp_path, "r", "1 Q0 a 1 3 x\n1 Q0 b 2 2 x\n1 Q0 a 3 1 x\n")
    with pytest.raises(InputError) as info:
        Ranking.from_trec(qrels, run)
    err = info.value
    assert err.path == str(run) and err.line == 3
    assert "'a'" in err.message and "'1'" in err.message
    # -M keeps only the top results; the duplicate below the cut is not an error (trec_eval).
    ranking = Ranking.from_trec(qrels, run, max_retrieved=2)
    assert ranking.num_ret().tolist() == [2]


def test_duplicate_judgment(tmp_path: Path) -> None:
    qrels = write(tmp_path, "q", "1 0 a 1\n1 0 b 0\n1 0 a 0\n")
    run = write(tmp_path, "r", "1 Q0 a 1 3 x\n")
    with pytest.raises(InputError) as info:
        Ranking.from_trec(qrels, run)
    assert info.value.path == str(qrels) and info.value.line == 3


def test_no_common_query(tmp_path: Path) -> None:
    qrels = write(tmp_path, "q", "1 0 a 1\n")
    run = write(tmp_path, "r", "2 Q0 a 1 3 x\n")
    with pytest.raises(InputError, match="no queries with both"):
        Ranking.from_trec(qrels, run)


# ------------------------------------------------------------------------------------------
# Ranking from TREC files: trec_eval's ordering rules
# ------------------------------------------------------------------------------------------


def test_ranking_order_and_ties(tmp_path: Path) -> None:
    # Ties in score are broken by docno descending; the rank column is ignored; queries come
    # in strcmp order ("10" < "9"); queries only in the run are ignored.
    qrels = write(tmp_path, "q", "9 0 b 1\n9 0 c 2\n10 0 z 1\n")
    run = write(
        tmp_path,
        "r",
        "9 Q0 a 1 1.0 x\n9 Q0 c 2 2.0 x\n9 Q0 b 3 1.0 x\n10 Q0 z 1 5 x\n11 Q0 q 1 1 x\n",
    )
    r = Ranking.from_trec(qrels, run)
    assert r.qids == ("10", "9")
    assert r.offsets.tolist() == [0, 1, 4]
    assert r.grades.tolist() == [1, 2, 1, -1]  # 10: z | 9: c (2.0), then b > a at 1.0
    assert r.scores is not None and r.scores.tolist() == [5.0, 2.0, 1.0, 1.0]
    assert r.judged_grades.tolist() == [1, 2, 1]
    assert r.runid == "x"


def test_ranking_all_qrels_queries(tmp_path: Path) -> None:
    qrels = write(tmp_path, "q", "1 0 a 1\n2 0 b 1\n")
    run = write(tmp_path, "r", "1 Q0 a 1 1 x\n")
    assert Ranking.from_trec(qrels, run).qids == ("1",)
    r = Ranking.from_trec(qrels, run, all_qrels_queries=True)
    assert r.qids == ("1", "2") and r.num_ret().tolist() == [1, 0]


def test_max_retrieved_tie_at_the_cut(tmp_path: Path) -> None:
    # a, b, c tie; docno descending puts c, b first, so -M2 keeps c and b, not the judged a.
    qrels = write(tmp_path, "q", "1 0 a 1\n")
    run = write(tmp_path, "r", "1 Q0 a 1 1.0 x\n1 Q0 b 2 1.0 x\n1 Q0 c 3 1.0 x\n")
    assert Ranking.from_trec(qrels, run, max_retrieved=2).grades.tolist() == [-1, -1]
    assert Ranking.from_trec(qrels, run, max_retrieved=3).grades.tolist() == [-1, -1, 1]


def test_unsorted_interleaved_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    lines, expect = [], {}
    for q in ("a", "b", "c"):
        scores = rng.integers(0, 5, size=30) / 2
        docs = [f"d{i}" for i in range(30)]
        pairs = sorted(zip(scores.tolist(), docs, strict=True), reverse=True)
        expect[q] = [d for _, d in pairs]
        lines += [f"{q} Q0 {d} 0 {s} x\n" for s, d in zip(scores.tolist(), docs, strict=True)]
    rng.shuffle(lines)
    qrels_text = "".join(f"{q} 0 d{i} {i % 3}\n" for q in "abc" for i in range(30))
    r = Ranking.from_trec(write(tmp_path, "q", qrels_text), write(tmp_path, "r", "".join(lines)))
    got = r.grades.reshape(3, 30).tolist()
    want = [[int(d[1:]) % 3 for d in expect[q]] for q in "abc"]
    assert got == want


# ------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------


def test_write_run_round_trip(tmp_path: Path) -> None:
    runs = {"b": {"x": 1.0, "y": 3.0}, "a": [("z", 0.25), ("w", 0.25)]}
    out = io.StringIO()
    assert write_run(out, runs, runid="fused") == 4
    assert out.getvalue() == (
        "a Q0 z 1 0.25 fused\n"
        "a Q0 w 2 0.25 fused\n"
        "b Q0 y 1 3.0 fused\n"
        "b Q0 x 2 1.0 fused\n"
    )
    path = tmp_path / "run"
    write_run(path, read_run(write(tmp_path, "in", out.getvalue())), max_per_query=1)
    assert path.read_text() == "a Q0 z 1 0.25 fused\nb Q0 y 1 3.0 fused\n"


def test_write_run_rejects_bad_ids() -> None:
    with pytest.raises(InputError):
        write_run(io.StringIO(), {"q 1": {"d": 1.0}})
    with pytest.raises(InputError):
        write_run(io.StringIO(), {"q": {"d": 1.0}}, runid="two words")


def test_all_qrels_queries_with_contiguous_run(tmp_path: Path) -> None:
    # Queries 1 and 3 have no results; the run is written query by query in rank order.
    qrels = write(tmp_path, "q", "1 0 a 1\n2 0 b 1\n2 0 c 2\n3 0 d 1\n4 0 e 1\n")
    run = write(tmp_path, "r", "4 Q0 e 1 9 x\n4 Q0 f 2 8 x\n2 Q0 c 1 3 x\n2 Q0 b 2 2 x\n")
    r = Ranking.from_trec(qrels, run, all_qrels_queries=True)
    assert r.qids == ("1", "2", "3", "4")
    assert r.offsets.tolist() == [0, 0, 2, 2, 4]
    assert r.grades.tolist() == [2, 1, 1, -1]


@pytest.mark.parametrize("seed", range(6))
def test_file_layouts_give_the_same_ranking(tmp_path: Path, seed: int) -> None:
    """Blocks in rank order (no sort), blocks out of order, and shuffled lines (full sort)
    must give identical rankings, with or without -M and -c."""
    rng = np.random.default_rng(seed)
    qrels_lines, results = [], []
    for q in range(int(rng.integers(2, 12))):
        qid = f"q{int(rng.integers(0, 40))}-{q}"
        docs = [f"d{j}" for j in range(int(rng.integers(1, 60)))]
        for d in docs:
            if rng.random() < 0.3:
                qrels_lines.append(f"{qid} 0 {d} {int(rng.integers(-1, 4))}\n")
        if rng.random() < 0.2:
            qrels_lines.append(f"{qid} 0 never-retrieved {int(rng.integers(0, 3))}\n")
        if rng.random() < 0.15:
            continue  # judged, not retrieved
        spread = int(rng.choice([1, 3, 50]))  # small spreads: many ties
        scores = rng.integers(0, spread + 1, len(docs)) / 4
        results.append((qid, docs, scores))
    results.append(("unjudged-query", ["x", "y"], np.array([1.0, 2.0])))
    qrels_lines.append("judged-only 0 z 1\n")
    qrels = write(tmp_path, "qrels", "".join(qrels_lines))

    def lines(qid: str, docs: list[str], scores: np.ndarray, ranked: bool) -> list[str]:
        pairs = list(zip(scores.tolist(), docs, strict=True))
        if ranked:
            pairs.sort(key=lambda p: -p[0])  # ties keep file order, not trec_eval's
        return [f"{qid} Q0 {d} 0 {s} run\n" for s, d in pairs]

    ranked = [ln for q, d, s in results for ln in lines(q, d, s, True)]
    permuted = [ln for i in rng.permutation(len(results)) for ln in lines(*results[i], True)]
    unsorted = [ln for q, d, s in results for ln in lines(q, d, s, False)]
    shuffled = list(ranked)
    rng.shuffle(shuffled)
    variants = [ranked, permuted, unsorted, shuffled]
    paths = [write(tmp_path, f"run{i}", "".join(v)) for i, v in enumerate(variants)]
    if not any(line.split()[0] in qrels.read_text().split() for line in ranked):
        return
    judged: dict[str, dict[str, int]] = {}
    for line in qrels_lines:
        qid, _, docno, rel = line.split()
        judged.setdefault(qid, {})[docno] = int(rel)
    compared = 0
    for kwargs in ({}, {"max_retrieved": 7}, {"all_qrels_queries": True}):
        try:
            first = Ranking.from_trec(qrels, paths[0], **kwargs)  # type: ignore[arg-type]
        except InputError:
            continue  # no query both judged and retrieved
        # trec_eval's rule, spelled out: score descending, then docno descending.
        by_qid = {q: (d, s) for q, d, s in results}
        for i, qid in enumerate(first.qids):
            docs, scores = by_qid.get(qid, ([], np.zeros(0)))
            order = sorted(zip(scores.tolist(), docs, strict=True), reverse=True)
            order = order[: kwargs.get("max_retrieved", len(order))]
            want = [judged[qid].get(d, -1) for _, d in order]
            lo, hi = first.offsets[i], first.offsets[i + 1]
            assert first.grades[lo:hi].tolist() == want
            compared += 1
        for path in paths[1:]:
            other = Ranking.from_trec(qrels, path, **kwargs)  # type: ignore[arg-type]
            assert other.qids == first.qids
            assert other.offsets.tolist() == first.offsets.tolist()
            assert other.grades.tolist() == first.grades.tolist()
            assert other.scores is not None and first.scores is not None
            assert other.scores.tolist() == first.scores.tolist()
            assert other.pooled.tolist() == first.pooled.tolist()
    assert compared > 0
