"""Parity of rageval's trec_eval engine with pytrec_eval (Python bindings to trec_eval's C code).

Many seeded random qrels/run pairs are written to disk in TREC format and evaluated by both
``rageval.retrieval.trec_eval.evaluate_files`` and ``pytrec_eval.RelevanceEvaluator``; every
per-query value and every summary ("all") value must agree to 1e-12.

The generated data is deliberately awkward:

* graded labels 0-3 (and, in some scenarios, negative labels, which trec_eval reads as "in the
  pool but unjudged": infAP's sampled pools, bpref's unjudged documents). Every judged topic
  keeps at least one label >= 0: for a topic judged only negative, trec_eval 9 and 10 reuse
  the previous topic's relevance-level count (undefined behaviour; pytrec_eval can hang on it),
  so there is no reference value to compare with;
* scores drawn from a small grid so ties are frequent (trec_eval breaks them by document id,
  descending), sometimes a single score for the whole ranking;
* queries judged but not retrieved and retrieved but not judged, retrieved documents that
  were never judged, judged documents that were never retrieved, queries whose judgments are
  all non-relevant;
* run lengths from 1 to a little over 1,000 (so the cutoff-1000 measures are exercised);
* lines of both files shuffled across queries, the rank column ignored, and scores written in
  several textual forms (``0.375``, ``0.375000``, ``3.7500e-01``).

pytrec_eval bundles trec_eval 9, which differs from trec_eval 10.0 in two ways handled here:

* trec_eval 9 stores scores as C ``float``, trec_eval 10.0 as ``double``. Every generated
  score is a multiple of 1/8 with a small magnitude, so both precisions read the same value;
  one test covers scores that differ only beyond single precision.
* iprec_at_recall and 11pt_avg turn a recall level into a number of relevant documents with
  ``(long)(x * num_rel + 0.9)`` in trec_eval 9 and ``lround(x * num_rel)`` in 10.0; their
  expected values come from a port of trec_eval's loop, itself checked against pytrec_eval
  with the old rounding.
"""

from __future__ import annotations

import functools
import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval.core.errors import UsageError
from rageval.retrieval import trec_eval

# Every test here compares rageval with the reference implementation.
pytestmark = pytest.mark.parity

pytrec_eval = pytest.importorskip("pytrec_eval")

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
Results = dict[str, dict[str, float]]

# trec_eval measure arguments (the same string is given to both tools).
MEASURES: list[str] = [
    "map",
    "P.1,2,3,5,10,20,100,1000",
    "recall.1,5,10,100,1000",
    "ndcg",
    "ndcg_cut.1,3,5,10,20,1000",
    "recip_rank",
    "Rprec",
    "bpref",
    "success.1,5,10",
    "infAP",
    "set_P",
    "set_recall",
    "set_F",
    "set_map",
    "set_relative_P",
    "iprec_at_recall",
    "11pt_avg",
    "map_cut.5,10,1000",
    "Rndcg",
    "Rprec_mult",
    "relative_P.5,10",
    "ndcg_rel",
    "binG",
    "G",
    "utility",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "num_nonrel_judged_ret",
    "gm_map",
    "gm_bpref",
]

# Measures whose value for an empty ranking is 0, so trec_eval -c (average over every judged
# query) is the plain sum over retrieved queries divided by the number of judged queries.
ZERO_WHEN_NOTHING_RETRIEVED: list[str] = [
    "map",
    "P.5,10",
    "recall.5,100",
    "ndcg",
    "ndcg_cut.10",
    "recip_rank",
    "Rprec",
    "bpref",
    "success.1",
    "set_P",
    "set_recall",
    "set_F",
    "iprec_at_recall",
    "map_cut.10",
    "num_ret",
    "num_rel_ret",
]

TOL = 1e-12

SCENARIOS: dict[str, dict[str, object]] = {
    # name: generator labels, relevance level, number of seeded cases
    "graded-rel1": {"labels": "graded", "rel_level": 1, "cases": 40, "seed": 1_000},
    "graded-rel2": {"labels": "graded", "rel_level": 2, "cases": 40, "seed": 2_000},
    "graded-rel3": {"labels": "graded", "rel_level": 3, "cases": 15, "seed": 3_000},
    "negative-rel1": {"labels": "negative", "rel_level": 1, "cases": 30, "seed": 4_000},
    "negative-rel2": {"labels": "negative", "rel_level": 2, "cases": 15, "seed": 5_000},
}


# --------------------------------------------------------------------------------------------
# Generation and file writing
# --------------------------------------------------------------------------------------------


def _qid(rng: np.random.Generator, taken: set[str]) -> str:
    while True:
        k = int(rng.integers(1, 400))
        qid = str(rng.choice([f"q{k}", str(k), f"{k:03d}", f"topic-{k}"]))
        if qid not in taken:
            taken.add(qid)
            return qid


def make_case(seed: int, labels: str = "graded") -> tuple[Qrels, Run]:
    """A random qrels/run pair; at least one query is both judged and retrieved."""
    rng = np.random.default_rng(seed)
    if labels == "graded":
        values, probs = [0, 1, 2, 3], [0.45, 0.25, 0.18, 0.12]
    else:
        values, probs = [-2, -1, 0, 1, 2, 3], [0.05, 0.2, 0.35, 0.2, 0.12, 0.08]
    qrels: Qrels = {}
    run: Run = {}
    taken: set[str] = set()
    n_queries = int(rng.integers(1, 9))
    for i in range(n_queries):
        qid = _qid(rng, taken)
        kind = "both" if i == 0 else str(rng.choice(["both", "both", "both", "qrels", "run"]))
        if rng.random() < 0.04:
            pool_size = int(rng.integers(1_000, 1_100))
        else:
            pool_size = int(rng.integers(1, 60))
        # Short, prefix-sharing ids ("d1", "d10", "d100") make the docno tie-break matter.
        id_space = max(pool_size * 3, 12)
        pool = [f"d{j}" for j in rng.choice(id_space, size=pool_size, replace=False)]
        if kind in ("both", "qrels"):
            n_judged = int(rng.integers(1, pool_size + 1))
            judged = list(rng.choice(pool, size=n_judged, replace=False))
            judged += [f"x{j}" for j in range(int(rng.integers(0, 4)))]  # judged, never retrieved
            if rng.random() < 0.1:
                rels = [0] * len(judged)  # a query with no relevant document
            else:
                rels = [int(v) for v in rng.choice(values, size=len(judged), p=probs)]
                if max(rels) < 0:
                    rels[int(rng.integers(0, len(rels)))] = int(rng.integers(0, 4))
            qrels[qid] = dict(zip(judged, rels, strict=True))
        if kind in ("both", "run"):
            n_ret = int(rng.integers(1, pool_size + 1))
            retrieved = rng.choice(pool, size=n_ret, replace=False)
            spread = int(rng.choice([0, 1, 3, 8, 63]))  # 0: every score tied
            scores = rng.integers(-spread, spread + 1, size=n_ret) / 8.0
            run[qid] = {str(d): float(s) for d, s in zip(retrieved, scores, strict=True)}
    return qrels, run


def _score_text(score: float, style: int) -> str:
    if style == 0:
        return repr(score)
    if style == 1:
        return f"{score:.6f}"
    return f"{score:.4e}"


def write_qrels(path: Path, qrels: Qrels, rng: np.random.Generator | None = None) -> None:
    lines = [f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items()]
    if rng is not None:
        rng.shuffle(lines)
    path.write_text("".join(lines))


def write_run(path: Path, run: Run, rng: np.random.Generator | None = None) -> None:
    lines = []
    for q, docs in run.items():
        for rank, (d, s) in enumerate(docs.items(), start=1):
            style = int(rng.integers(0, 3)) if rng is not None else 0
            lines.append(f"{q} Q0 {d} {rank} {_score_text(s, style)} tag\n")
    if rng is not None:
        rng.shuffle(lines)
    path.write_text("".join(lines))


def write_case(
    directory: Path, qrels: Qrels, run: Run, seed: int | None = None
) -> tuple[Path, Path]:
    rng = None if seed is None else np.random.default_rng(seed + 7_777)
    directory.mkdir(parents=True, exist_ok=True)
    qrels_path, run_path = directory / "qrels.txt", directory / "run.txt"
    write_qrels(qrels_path, qrels, rng)
    write_run(run_path, run, rng)
    return qrels_path, run_path


# --------------------------------------------------------------------------------------------
# Evaluation with both tools
# --------------------------------------------------------------------------------------------


def _base(measure: str) -> str:
    return measure.split(".", 1)[0]


def belongs_to(key: str, measure: str) -> bool:
    """Whether an output name (``P_10``, ``iprec_at_recall_0.10``) comes from ``measure``."""
    return re.fullmatch(rf"{re.escape(_base(measure))}(_[0-9.]+)?", key) is not None


# trec_eval prints gm_map and gm_bpref only in the summary (the geometric mean over topics of
# map and bpref, each floored at MIN_GEO_MEAN). pytrec_eval 0.5.x is unreliable for them
# (wrong per-topic values, and a crash when both are asked for together), so their expected
# values are derived from pytrec_eval's map and bpref with trec_eval's own formula.
GEOMETRIC = {"gm_map": "map", "gm_bpref": "bpref"}
MIN_GEO_MEAN = 1e-5


# pytrec_eval bundles trec_eval 9, which turns a recall level x into a number of relevant
# documents as (long)(x * num_rel + 0.9); trec_eval 10.0 uses lround(x * num_rel) for
# iprec_at_recall and 11pt_avg. For those two measures the expected values come from a
# line-by-line port of trec_eval's loop, which test_interpolation_port_matches_pytrec checks
# against pytrec_eval with the old rounding.
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
RELVALUE_NONPOOL, RELVALUE_UNJUDGED = -1, -2


def lround(x: float) -> int:
    """C's lround for x >= 0 (halves away from zero), without the x + 0.5 rounding error."""
    f = math.floor(x)
    return f + 1 if x - f >= 0.5 else f


def trec_eval_9_cutoff(x: float) -> int:
    """trec_eval 9's (long)(x + 0.9)."""
    return int(x + 0.9)


def ranked_rels(judgments: dict[str, int], docs: dict[str, float]) -> list[int]:
    """trec_eval's relevance list: score descending, ties by document id descending."""
    ranked = sorted(docs, key=lambda d: (docs[d], d), reverse=True)
    out = []
    for d in ranked:
        rel = judgments.get(d)
        if rel is None:
            out.append(RELVALUE_NONPOOL)
        else:
            out.append(RELVALUE_UNJUDGED if rel < 0 else rel)
    return out


def interpolated_precisions(
    rels: list[int], num_rel: int, rel_level: int, rounding: Callable[[float], int]
) -> list[float]:
    """trec_eval's te_calc_iprec_at_recall at RECALL_LEVELS."""
    cutoffs = [rounding(x * num_rel) for x in RECALL_LEVELS]
    values = [0.0] * len(cutoffs)
    num_ret = len(rels)
    num_rel_ret = sum(1 for r in rels if r >= rel_level)
    current = len(cutoffs) - 1
    while current >= 0 and cutoffs[current] > num_rel_ret:
        current -= 1
    int_precis = num_rel_ret / num_ret
    rel_so_far = num_rel_ret
    i = num_ret
    while i > 0 and rel_so_far > 0:
        precis = rel_so_far / i
        int_precis = max(int_precis, precis)
        if rels[i - 1] >= rel_level:
            while current >= 0 and rel_so_far == cutoffs[current]:
                values[current] = int_precis
                current -= 1
            rel_so_far -= 1
        i -= 1
    while current >= 0:
        values[current] = int_precis
        current -= 1
    return values


def interpolation_values(
    qrels: Qrels, run: Run, rel_level: int, rounding: Callable[[float], int]
) -> Results:
    """iprec_at_recall_* and 11pt_avg per topic (topics both judged and retrieved)."""
    out: Results = {}
    for qid, docs in run.items():
        if qid not in qrels:
            continue
        num_rel = sum(1 for r in qrels[qid].values() if r >= rel_level)
        values = interpolated_precisions(
            ranked_rels(qrels[qid], docs), num_rel, rel_level, rounding
        )
        row = {f"iprec_at_recall_{x:.2f}": v for x, v in zip(RECALL_LEVELS, values, strict=True)}
        # 11pt_avg sums from the highest level down, as trec_eval does.
        row["11pt_avg"] = sum(reversed(values)) / len(values)
        out[qid] = row
    return out


def pytrec_evaluate(
    qrels_path: Path,
    run_path: Path,
    measures: list[str],
    rel_level: int,
    *,
    trec_eval_10: bool = True,
) -> Results:
    """pytrec_eval on the same files (parsed with its own helpers), with trec_eval 10.0's
    rounding for iprec_at_recall and 11pt_avg."""
    with qrels_path.open() as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    with run_path.open() as fh:
        run = pytrec_eval.parse_run(fh)
    asked = [m for m in measures if m not in GEOMETRIC]
    helpers = [GEOMETRIC[m] for m in measures if m in GEOMETRIC and GEOMETRIC[m] not in asked]
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, asked + helpers, relevance_level=rel_level)
    results = evaluator.evaluate(run)
    for values in results.values():
        for gm, base in GEOMETRIC.items():
            if gm in measures:
                values[gm] = math.log(max(values[base], MIN_GEO_MEAN))
        for base in helpers:
            del values[base]
    if trec_eval_10 and ("iprec_at_recall" in measures or "11pt_avg" in measures):
        trec10 = interpolation_values(qrels, run, rel_level, lround)
        for qid, values in results.items():
            for k in list(values):
                if k.startswith("iprec_at_recall_") or k == "11pt_avg":
                    values[k] = trec10[qid][k]
    return results


def pytrec_summary(per_query: Results) -> dict[str, float]:
    keys = next(iter(per_query.values())).keys()
    return {
        k: pytrec_eval.compute_aggregated_measure(k, [v[k] for v in per_query.values()])
        for k in keys
    }


@functools.cache
def rageval_supported(measure: str) -> bool:
    """Whether rageval accepts a measure argument (checked once on a tiny case)."""
    with tempfile.TemporaryDirectory() as tmp:
        qrels_path, run_path = write_case(
            Path(tmp), {"1": {"a": 1, "b": 0}}, {"1": {"a": 1.0, "c": 0.5}}
        )
        try:
            trec_eval.evaluate_files(qrels_path, run_path, [measure])
        except UsageError:
            return False
    return True


def supported(measures: list[str]) -> list[str]:
    return [m for m in measures if rageval_supported(m)]


def compare(
    ours: Results,
    theirs: Results,
    measures: list[str],
    *,
    check_summary: bool = True,
) -> list[str]:
    """Human-readable mismatches between rageval's and pytrec_eval's results."""
    problems: list[str] = []
    our_qids = {q for q in ours if q != "all"}
    if our_qids != set(theirs):
        problems.append(
            f"per-query topics differ: rageval {sorted(our_qids)} vs pytrec {sorted(theirs)}"
        )
    for qid in sorted(our_qids & set(theirs)):
        for measure in measures:
            want = {k: v for k, v in theirs[qid].items() if belongs_to(k, measure)}
            got = {k: v for k, v in ours[qid].items() if belongs_to(k, measure)}
            if measure in GEOMETRIC and not got:
                continue  # summary-only in trec_eval's output
            if set(want) != set(got):
                problems.append(f"{measure} topic {qid}: names {sorted(got)} vs {sorted(want)}")
                continue
            for k, v in want.items():
                if not math.isclose(got[k], v, rel_tol=TOL, abs_tol=TOL):
                    problems.append(f"{k} topic {qid}: rageval {got[k]!r} pytrec {v!r}")
    if check_summary and theirs:
        summary = pytrec_summary(theirs)
        got_all = ours.get("all", {})
        for measure in measures:
            for k, v in summary.items():
                if not belongs_to(k, measure):
                    continue
                if k not in got_all:
                    problems.append(f"{k} all: missing from rageval")
                elif not math.isclose(got_all[k], v, rel_tol=TOL, abs_tol=TOL):
                    problems.append(f"{k} all: rageval {got_all[k]!r} pytrec {v!r}")
    return problems


def _case_text(qrels_path: Path, run_path: Path, qid: str | None) -> str:
    def pick(path: Path) -> str:
        lines = path.read_text().splitlines()
        if qid is not None:
            lines = [ln for ln in lines if ln.split()[0] == qid]
        return "\n".join(lines[:60]) + ("\n..." if len(lines) > 60 else "")

    return f"--- qrels ---\n{pick(qrels_path)}\n--- run ---\n{pick(run_path)}"


@pytest.fixture(scope="module")
def case_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity")


@functools.cache
def _scenario_cases(
    name: str, case_root: Path
) -> list[tuple[int, Path, Path, Results, Results | str]]:
    """(seed, qrels, run, pytrec results, rageval results or the error it raised)."""
    spec = SCENARIOS[name]
    root = case_root / name
    measures = supported(MEASURES)
    out = []
    for i in range(int(spec["cases"])):  # type: ignore[call-overload]
        seed = int(spec["seed"]) + i  # type: ignore[call-overload]
        qrels, run = make_case(seed, str(spec["labels"]))
        qrels_path, run_path = write_case(root / str(seed), qrels, run, seed)
        rel_level = int(spec["rel_level"])  # type: ignore[call-overload]
        theirs = pytrec_evaluate(qrels_path, run_path, MEASURES, rel_level)
        try:
            ours: Results | str = trec_eval.evaluate_files(
                qrels_path, run_path, measures, rel_level=rel_level
            )
        except Exception as exc:  # reported by every test of the scenario
            ours = f"{type(exc).__name__}: {exc}"
        out.append((seed, qrels_path, run_path, theirs, ours))
    return out


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_interpolation_port_matches_pytrec(scenario: str, case_root: Path) -> None:
    """With trec_eval 9's rounding, the port reproduces pytrec_eval exactly: the port (used
    for trec_eval 10.0's expected iprec_at_recall and 11pt_avg) is faithful."""
    rel_level = int(SCENARIOS[scenario]["rel_level"])  # type: ignore[call-overload]
    for _, qrels_path, run_path, _, _ in _scenario_cases(scenario, case_root):
        theirs = pytrec_evaluate(
            qrels_path, run_path, ["iprec_at_recall", "11pt_avg"], rel_level, trec_eval_10=False
        )
        with qrels_path.open() as fh:
            qrels = pytrec_eval.parse_qrel(fh)
        with run_path.open() as fh:
            run = pytrec_eval.parse_run(fh)
        port = interpolation_values(qrels, run, rel_level, trec_eval_9_cutoff)
        assert port.keys() == theirs.keys()
        for qid, values in theirs.items():
            for k, v in values.items():
                assert math.isclose(port[qid][k], v, rel_tol=TOL, abs_tol=TOL), (qid, k)


def test_generated_scores_survive_single_precision() -> None:
    for seed in range(50):
        _, run = make_case(seed)
        for docs in run.values():
            scores = np.array(list(docs.values()))
            assert np.array_equal(scores.astype(np.float32).astype(np.float64), scores)
            for s in scores:
                for style in range(3):
                    assert float(_score_text(float(s), style)) == s


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("measure", MEASURES)
def test_per_query_and_summary_parity(scenario: str, measure: str, case_root: Path) -> None:
    if not rageval_supported(measure):
        pytest.skip(f"rageval does not accept {measure!r}")
    failures = []
    cases = _scenario_cases(scenario, case_root)
    for seed, qrels_path, run_path, theirs, ours in cases:
        if isinstance(ours, str):
            failures.append((seed, [f"rageval raised {ours}"], qrels_path, run_path, None))
            continue
        problems = compare(ours, theirs, [measure])
        if problems:
            m = re.search(r"topic (\S+):", problems[0])
            failures.append((seed, problems, qrels_path, run_path, m.group(1) if m else None))
    if failures:
        seed, problems, qrels_path, run_path, qid = failures[0]
        rel = SCENARIOS[scenario]["rel_level"]
        pytest.fail(
            f"{len(failures)} of {len(cases)} cases differ for {measure!r} "
            f"(relevance level {rel}); first: seed {seed}\n"
            + "\n".join(problems[:10])
            + "\n"
            + _case_text(qrels_path, run_path, qid)
        )


@pytest.mark.parametrize("seed", range(6_000, 6_012))
def test_all_queries_flag_matches_trec_eval_c(seed: int, tmp_path: Path) -> None:
    """-c: the summary averages over every judged topic, unretrieved ones scoring 0."""
    measures = supported(ZERO_WHEN_NOTHING_RETRIEVED)
    qrels, run = make_case(seed)
    qrels_path, run_path = write_case(tmp_path, qrels, run, seed)
    theirs = pytrec_evaluate(qrels_path, run_path, measures, 1)
    ours = trec_eval.evaluate_files(qrels_path, run_path, measures, all_queries=True)
    n_judged = len(qrels)
    keys = next(iter(theirs.values())).keys()
    for k in keys:
        total = math.fsum(v[k] for v in theirs.values())
        want = total if k.startswith("num_") else total / n_judged
        assert math.isclose(ours["all"][k], want, rel_tol=TOL, abs_tol=TOL), (
            f"{k}: rageval {ours['all'][k]!r}, expected {want!r}\n"
            + _case_text(qrels_path, run_path, None)
        )


def _top(docs: dict[str, float], depth: int) -> dict[str, float]:
    # trec_eval's order: score descending, then document id descending.
    ranked = sorted(docs, key=lambda d: (docs[d], d), reverse=True)
    return {d: docs[d] for d in ranked[:depth]}


@pytest.mark.parametrize("seed", range(8_000, 8_010))
def test_scores_are_compared_in_double_precision(seed: int, tmp_path: Path) -> None:
    """trec_eval 10.0 keeps scores as C doubles (trec_eval 9, and so pytrec_eval, rounded them
    to float): scores 1e-8 apart are distinct, not ties. The reference is pytrec_eval on an
    order-preserving recoding of the scores into values single precision holds exactly."""
    rng = np.random.default_rng(seed)
    qrels, run = make_case(seed)
    for docs in run.values():
        for d in docs:
            docs[d] = 1.0 + int(rng.integers(0, 6)) * 1e-8 + int(rng.integers(0, 3)) * 0.25
    qrels_path, run_path = tmp_path / "qrels.txt", tmp_path / "run.txt"
    write_qrels(qrels_path, qrels)
    run_path.write_text(
        "".join(
            f"{q} Q0 {d} {rank} {s:.8f} tag\n"
            for q, docs in run.items()
            for rank, (d, s) in enumerate(docs.items(), start=1)
        )
    )
    read_back = {q: {d: float(f"{s:.8f}") for d, s in docs.items()} for q, docs in run.items()}
    distinct = sorted({s for docs in read_back.values() for s in docs.values()})
    code = {s: i / 8 for i, s in enumerate(distinct)}
    recoded = {q: {d: code[s] for d, s in docs.items()} for q, docs in read_back.items()}
    _, recoded_path = write_case(tmp_path / "recoded", qrels, recoded)

    measures = supported(["map", "P.1,3,5", "ndcg_cut.3", "recip_rank", "bpref", "Rprec"])
    theirs = pytrec_evaluate(qrels_path, recoded_path, measures, 1)
    ours = trec_eval.evaluate_files(qrels_path, run_path, measures)
    problems = compare(ours, theirs, measures)
    assert not problems, "\n".join(problems[:10]) + "\n" + _case_text(qrels_path, run_path, None)


@pytest.mark.parametrize("depth", [1, 3, 10])
def test_max_retrieved_matches_truncated_ranking(depth: int, tmp_path: Path) -> None:
    """-M N: only the top N documents of each ranking (after trec_eval's sort) count."""
    measures = supported(
        [
            "map",
            "P.1,5,10",
            "recall.5",
            "ndcg",
            "recip_rank",
            "bpref",
            "num_ret",
            "num_rel_ret",
            "Rprec",
        ]
    )
    for seed in range(7_000, 7_015):
        qrels, run = make_case(seed)
        case_dir = tmp_path / str(seed)
        qrels_path, run_path = write_case(case_dir, qrels, run, seed)
        ours = trec_eval.evaluate_files(qrels_path, run_path, measures, max_retrieved=depth)
        truncated = {q: _top(docs, depth) for q, docs in run.items()}
        _, cut_run_path = write_case(case_dir / "cut", qrels, truncated)
        theirs = pytrec_evaluate(qrels_path, cut_run_path, measures, 1)
        problems = compare(ours, theirs, measures)
        assert not problems, (
            "\n".join(problems[:10]) + "\n" + _case_text(qrels_path, run_path, None)
        )


# Small hand-shrinkable cases: hypothesis finds a minimal counterexample if one exists.
_doc = st.sampled_from([f"d{i}" for i in range(12)])
_label = st.integers(min_value=-1, max_value=3)
_score = st.integers(min_value=-4, max_value=4).map(lambda k: k / 8)


@st.composite
def _small_case(draw: st.DrawFn) -> tuple[Qrels, Run, int]:
    qids = draw(st.lists(st.sampled_from(["1", "2", "10"]), min_size=1, max_size=3, unique=True))
    qrels: Qrels = {}
    run: Run = {}
    for qid in qids:
        judged = draw(
            st.dictionaries(_doc, _label, min_size=1, max_size=8).filter(
                lambda d: max(d.values()) >= 0
            )
        )
        retrieved = draw(st.dictionaries(_doc, _score, min_size=1, max_size=10))
        qrels[qid] = judged
        run[qid] = retrieved
    if draw(st.booleans()):
        run["99"] = {"d1": 0.5}  # retrieved, never judged
    return qrels, run, draw(st.sampled_from([1, 2]))


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_small_case())
def test_small_cases_parity(case: tuple[Qrels, Run, int]) -> None:
    qrels, run, rel_level = case
    measures = supported(MEASURES)
    with tempfile.TemporaryDirectory() as tmp:
        qrels_path, run_path = write_case(Path(tmp), qrels, run)
        theirs = pytrec_evaluate(qrels_path, run_path, MEASURES, rel_level)
        ours = trec_eval.evaluate_files(qrels_path, run_path, measures, rel_level=rel_level)
        problems = compare(ours, theirs, measures)
        assert not problems, (
            f"relevance level {rel_level}\n"
            + "\n".join(problems[:10])
            + "\n"
            + _case_text(qrels_path, run_path, None)
        )


def test_every_pytrec_measure_is_supported() -> None:
    """rageval claims to be a trec_eval drop-in: every measure compared here must be accepted."""
    missing = [m for m in MEASURES if not rageval_supported(m)]
    assert not missing, f"rageval rejects: {missing}"
