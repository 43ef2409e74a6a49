"""Claim and nugget formulas: hand-computed records, every unscored case with its reason, and
parity with the reference implementations (RAGChecker 0.1.9's ``computation.py``, nuggetizer
0.0.5's ``calculate_nugget_scores``) on random verdict sets and on RAGChecker's own example."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.judge.claims.claim_scores import CLAIM_METRICS, ORACLE_NAMES, PIECES, claim_score
from rageval.judge.claims.nugget_scores import NUGGET_METRICS, nugget_score
from rageval.judge.claims.nugget_scores import ORACLE_NAMES as NUGGET_ORACLE_NAMES

EXAMPLE = Path(__file__).parents[2] / "data" / "ragchecker_checking_outputs.json"
LABELS = ("entailment", "neutral", "contradiction")
RAGCHECKER_INSTALL = "pip install --no-deps ragchecker==0.1.9"
NUGGETIZER_INSTALL = "pip install nuggetizer==0.0.5"

NO_ANSWER_CLAIMS = "the answer has no claims (RAGChecker scores 0)"
NO_REFERENCE_CLAIMS = "the reference has no claims (RAGChecker scores 0)"
NO_CONTEXTS = "the record has no contexts (RAGChecker scores 0)"
NOTHING_RECALLED = "no reference claim is entailed by any context: 0/0 (RAGChecker scores 0)"
EMPTY_REASONS = {NO_ANSWER_CLAIMS, NO_REFERENCE_CLAIMS, NO_CONTEXTS, NOTHING_RECALLED}


# --- the oracles ---------------------------------------------------------------------------

def oracle_unavailable(reason: str) -> NoReturn:
    # CI installs the oracles, so there a missing one is a failure, not a skip.
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def load_ragchecker() -> types.ModuleType:
    """RAGChecker's ``computation`` module, without running the package ``__init__`` (which
    imports the claim extractor and checker, heavy libraries not needed here)."""
    install = f"{RAGCHECKER_INSTALL} (and dataclasses-json)"
    spec = importlib.util.find_spec("ragchecker")
    if spec is None or not spec.submodule_search_locations:
        oracle_unavailable(f"ragchecker is not installed: {install}")
    if "ragchecker" not in sys.modules:
        package = types.ModuleType("ragchecker")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["ragchecker"] = package
    try:
        return importlib.import_module("ragchecker.computation")
    except ImportError as error:
        oracle_unavailable(f"ragchecker.computation does not import ({error}): {install}")


def load_nuggetizer() -> Callable[..., Any]:
    try:
        metrics = importlib.import_module("nuggetizer.core.metrics")
    except ImportError as error:
        oracle_unavailable(f"nuggetizer is not installed ({error}): {NUGGETIZER_INSTALL}")
    return metrics.calculate_nugget_scores


@pytest.fixture(scope="module")
def ragchecker() -> types.ModuleType:
    return load_ragchecker()


@pytest.fixture(scope="module")
def nuggetizer() -> Callable[..., Any]:
    return load_nuggetizer()


def test_a_missing_oracle_skips_here_and_fails_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_module(name: str) -> NoReturn:
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(importlib, "import_module", no_module)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=re.escape(RAGCHECKER_INSTALL)):
        load_ragchecker()
    with pytest.raises(pytest.skip.Exception, match=re.escape(NUGGETIZER_INSTALL)):
        load_nuggetizer()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=re.escape(RAGCHECKER_INSTALL)):
        load_ragchecker()
    with pytest.raises(pytest.fail.Exception, match=re.escape(NUGGETIZER_INSTALL)):
        load_nuggetizer()


def oracle_metrics(computation: types.ModuleType, result: Any) -> dict[str, float]:
    """Every RAGChecker metric of one RAGResult, as its evaluator computes them."""
    for evaluate in computation.METRIC_FUNC_MAP.values():
        evaluate(result)
    return result.metrics


# --- building records ----------------------------------------------------------------------

def claims_details(answer: list[tuple[str, list[str]]], reference: list[tuple[str, list[str]]],
                   contexts: list[str]) -> dict[str, Any]:
    """Details from (verdict against the other text, verdicts against each context) per claim."""
    def side(claims: list[tuple[str, list[str]]], key: str, name: str) -> list[dict[str, Any]]:
        return [{"text": f"{name}{i}", key: other,
                 "contexts": dict(zip(contexts, row, strict=True))}
                for i, (other, row) in enumerate(claims)]
    return {"contexts": contexts, "answer_claims": side(answer, "reference", "a"),
            "reference_claims": side(reference, "answer", "r")}


def ragchecker_result(computation: types.ModuleType, details: Mapping[str, Any]) -> Any:
    """The same verdicts as RAGChecker's RAGResult (its labels are capitalised)."""
    ids = details["contexts"]
    answer, reference = details["answer_claims"], details["reference_claims"]
    return computation.RAGResult(
        query_id="q", query="", gt_answer="", response="",
        answer2response=[c["reference"].capitalize() for c in answer],
        response2answer=[c["answer"].capitalize() for c in reference],
        retrieved2response=[[c["contexts"][d].capitalize() for d in ids] for c in answer],
        retrieved2answer=[[c["contexts"][d].capitalize() for d in ids] for c in reference],
    )


def scores(details: Mapping[str, Any]) -> dict[str, tuple[float, str | None]]:
    return {metric: claim_score(details, metric) for metric in CLAIM_METRICS}


E, N, C = LABELS

# Two contexts d1, d2. d1 entails r1 and r2 (relevant); d2 entails no reference claim
# (irrelevant).
HAND = claims_details(
    answer=[
        (E, [E, N]),  # a1: correct, in d1
        (N, [N, E]),  # a2: incorrect, only in the irrelevant d2 -> noise irrelevant
        (C, [E, E]),  # a3: incorrect, in the relevant d1 (and d2) -> noise relevant only
        (N, [C, N]),  # a4: incorrect, in no context -> hallucination
        (E, [N, N]),  # a5: correct, in no context -> self-knowledge
    ],
    reference=[
        (E, [E, N]),  # r1: in the answer, in d1
        (N, [E, C]),  # r2: not in the answer, in d1
        (E, [N, N]),  # r3: in the answer, in no context
    ],
    contexts=["d1", "d2"],
)
HAND_EXPECTED = {
    "precision": 2 / 5,  # a1, a5
    "recall": 2 / 3,  # r1, r3
    "f1": 2 * (2 / 5) * (2 / 3) / (2 / 5 + 2 / 3),  # = 0.5
    "claim_recall": 2 / 3,  # r1, r2 are in some context
    "context_precision": 1 / 2,  # d1 entails a reference claim, d2 none
    "context_utilization": 1 / 2,  # recalled {r1, r2}, of which in the answer {r1}
    "noise_sensitivity.relevant": 1 / 5,  # a3
    "noise_sensitivity.irrelevant": 1 / 5,  # a2 (a3 counts as relevant only)
    "hallucination": 1 / 5,  # a4
    "self_knowledge": 1 / 5,  # a5
    "faithfulness": 3 / 5,  # a1, a2, a3
}


# --- hand-computed -------------------------------------------------------------------------

def test_the_public_tables_cover_the_same_metrics() -> None:
    assert set(PIECES) == set(ORACLE_NAMES) == set(CLAIM_METRICS) == set(HAND_EXPECTED)
    assert len(CLAIM_METRICS) == 11


@pytest.mark.parametrize("metric", CLAIM_METRICS)
def test_hand_computed_record(metric: str) -> None:
    value, reason = claim_score(HAND, metric)
    assert reason is None
    assert type(value) is float
    assert value == pytest.approx(HAND_EXPECTED[metric], abs=1e-15)


def test_f1_is_a_real_zero_when_precision_is_zero() -> None:
    details = claims_details(answer=[(N, [E])], reference=[(E, [E])], contexts=["d1"])
    assert claim_score(details, "precision") == (0.0, None)
    assert claim_score(details, "f1") == (0.0, None)


def test_claim_recall_is_a_real_zero_when_no_context_entails_a_reference_claim() -> None:
    details = claims_details(answer=[(E, [N])], reference=[(E, [N]), (N, [C])], contexts=["d1"])
    got = scores(details)
    assert got["claim_recall"] == (0.0, None)
    assert got["context_precision"] == (0.0, None)
    assert math.isnan(got["context_utilization"][0])
    assert got["context_utilization"][1] == NOTHING_RECALLED


# --- unscored: nothing to average over ----------------------------------------------------

def unscored(details: Mapping[str, Any]) -> dict[str, str]:
    """metric -> reason, for the unscored metrics (whose values must be nan)."""
    out = {}
    for metric, (value, reason) in scores(details).items():
        assert (reason is None) != math.isnan(value), metric
        if reason is not None:
            out[metric] = reason
    return out


def test_no_answer_claims() -> None:
    details = claims_details(answer=[], reference=[(E, [E])], contexts=["d1"])
    answer_side = ("precision", "f1", "noise_sensitivity.relevant",
                   "noise_sensitivity.irrelevant", "hallucination", "self_knowledge",
                   "faithfulness")
    assert unscored(details) == dict.fromkeys(answer_side, NO_ANSWER_CLAIMS)


def test_no_reference_claims() -> None:
    details = claims_details(answer=[(E, [E])], reference=[], contexts=["d1"])
    reference_side = ("recall", "f1", "claim_recall", "context_precision", "context_utilization",
                      "noise_sensitivity.relevant", "noise_sensitivity.irrelevant")
    assert unscored(details) == dict.fromkeys(reference_side, NO_REFERENCE_CLAIMS)


def test_no_contexts() -> None:
    details = claims_details(answer=[(E, [])], reference=[(N, [])], contexts=[])
    assert unscored(details) == dict.fromkeys(
        [m for m in CLAIM_METRICS if m not in ("precision", "recall", "f1")], NO_CONTEXTS)


def test_nothing_at_all_names_the_answer_first() -> None:
    details = claims_details(answer=[], reference=[], contexts=[])
    got = unscored(details)
    assert set(got) == set(CLAIM_METRICS)
    assert got["f1"] == got["precision"] == got["faithfulness"] == NO_ANSWER_CLAIMS
    assert got["recall"] == got["claim_recall"] == NO_REFERENCE_CLAIMS


# --- unscored: missing verdicts -----------------------------------------------------------

def test_claims_not_extracted() -> None:
    details = {"contexts": ["d1"], "answer_claims": None, "reference_claims": None}
    got = unscored(details)
    assert set(got) == set(CLAIM_METRICS)
    assert got["precision"] == got["faithfulness"] == "the answer's claims were not extracted"
    assert got["recall"] == got["claim_recall"] == "the reference's claims were not extracted"
    assert got["f1"] == "the answer's claims were not extracted"
    details["errors"] = {"answer_claims": "extraction failed: timeout"}
    assert claim_score(details, "hallucination")[1] == "extraction failed: timeout"


@pytest.mark.parametrize(("piece", "generic", "hit"), [
    ("answer_claims.reference", "the answer's claims were not checked against the reference",
     ("precision", "f1", "noise_sensitivity.relevant", "noise_sensitivity.irrelevant",
      "hallucination", "self_knowledge")),
    ("answer_claims.contexts", "the answer's claims were not checked against the contexts",
     ("noise_sensitivity.relevant", "noise_sensitivity.irrelevant", "hallucination",
      "self_knowledge", "faithfulness")),
    ("reference_claims.answer", "the reference's claims were not checked against the answer",
     ("recall", "f1", "context_utilization")),
    ("reference_claims.contexts", "the reference's claims were not checked against the contexts",
     ("claim_recall", "context_precision", "context_utilization", "noise_sensitivity.relevant",
      "noise_sensitivity.irrelevant")),
])
def test_a_missing_piece_unscores_exactly_the_metrics_that_need_it(
        piece: str, generic: str, hit: tuple[str, ...]) -> None:
    side, key = piece.split(".")
    details = json.loads(json.dumps(HAND))
    details[side][1][key] = None
    assert unscored(details) == dict.fromkeys(hit, generic)
    assert {m for m, needs in PIECES.items() if piece in needs} == set(hit)
    # The piece's own error first, then the extraction's.
    details["errors"] = {side: "extraction note"}
    assert claim_score(details, hit[0])[1] == "extraction note"
    details["errors"][piece] = "checker reply unreadable"
    assert claim_score(details, hit[0])[1] == "checker reply unreadable"


def test_a_context_verdict_missing_for_one_id() -> None:
    details = json.loads(json.dumps(HAND))
    del details["answer_claims"][0]["contexts"]["d2"]
    assert claim_score(details, "faithfulness")[1] == (
        "the answer's claims were not checked against the contexts")
    details["answer_claims"][0]["contexts"] = None
    assert claim_score(details, "faithfulness")[1] == (
        "the answer's claims were not checked against the contexts")
    assert claim_score(details, "precision") == (2 / 5, None)


def test_unknown_metric_and_unknown_verdict_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown claim metric"):
        claim_score(HAND, "noise_sensitivity_in_relevant")
    details = claims_details(answer=[("Entailment", [E])], reference=[], contexts=["d1"])
    with pytest.raises(ValueError, match="unknown verdict"):
        claim_score(details, "precision")


# --- parity with RAGChecker ---------------------------------------------------------------

@st.composite
def verdict_sets(draw: st.DrawFn) -> dict[str, Any]:
    n_contexts = draw(st.integers(0, 4))
    label = st.sampled_from(LABELS)
    claim = st.tuples(label, st.lists(label, min_size=n_contexts, max_size=n_contexts))
    return claims_details(answer=draw(st.lists(claim, max_size=6)),
                          reference=draw(st.lists(claim, max_size=6)),
                          contexts=[f"d{k}" for k in range(n_contexts)])


@pytest.mark.parity
@given(details=verdict_sets())
@settings(max_examples=300, deadline=None)
def test_parity_with_ragchecker_on_random_verdicts(
        ragchecker: types.ModuleType, details: dict[str, Any]) -> None:
    oracle = oracle_metrics(ragchecker, ragchecker_result(ragchecker, details))
    everything = all(details[k] for k in ("answer_claims", "reference_claims", "contexts"))
    for metric, (value, reason) in scores(details).items():
        theirs = oracle[ORACLE_NAMES[metric]]
        if reason is None:
            assert value.hex() == float(theirs).hex(), metric  # bit for bit
        else:
            assert reason in EMPTY_REASONS, metric
            assert theirs == 0, (metric, reason)
            # With claims on both sides and contexts, only the 0/0 is left unscored.
            assert not everything or (metric, reason) == ("context_utilization",
                                                          NOTHING_RECALLED)


# --- RAGChecker's own example --------------------------------------------------------------

def example_details(record: Mapping[str, Any]) -> dict[str, Any]:
    """RAGChecker's record as details: triplet claims joined with spaces, labels lower-cased."""
    ids = [doc["doc_id"] for doc in record["retrieved_context"]]
    assert len(set(ids)) == len(ids)

    def side(claims: list[list[str]], other: list[str], rows: list[list[str]],
             key: str) -> list[dict[str, Any]]:
        return [{"text": " ".join(claim), key: verdict.lower(),
                 "contexts": {d: v.lower() for d, v in zip(ids, row, strict=True)}}
                for claim, verdict, row in zip(claims, other, rows, strict=True)]

    return {
        "contexts": ids,
        "answer_claims": side(record["response_claims"], record["answer2response"],
                              record["retrieved2response"], "reference"),
        "reference_claims": side(record["gt_answer_claims"], record["response2answer"],
                                 record["retrieved2answer"], "answer"),
    }


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


@pytest.mark.parity
def test_ragchecker_example_per_record(ragchecker: types.ModuleType,
                                       example: dict[str, Any]) -> None:
    for record in example["results"]:
        stored = record["metrics"]
        fresh = {k: v for k, v in record.items() if k != "metrics"}  # else it is not recomputed
        oracle = oracle_metrics(ragchecker, ragchecker.RAGResult.from_dict(fresh))
        for metric, (value, reason) in scores(example_details(record)).items():
            assert reason is None, (record["query_id"], metric, reason)
            assert value == oracle[ORACLE_NAMES[metric]] == stored[ORACLE_NAMES[metric]], metric


@pytest.mark.parity
def test_ragchecker_example_aggregate(ragchecker: types.ModuleType,
                                      example: dict[str, Any]) -> None:
    """The means x100 rounded to 0.1, as RAGChecker's evaluator prints them."""
    printed = {name: value for group in example["metrics"].values()
               for name, value in group.items()}
    results = [ragchecker.RAGResult.from_dict({k: v for k, v in r.items() if k != "metrics"})
               for r in example["results"]]
    for result in results:
        oracle_metrics(ragchecker, result)
    ours = [scores(example_details(r)) for r in example["results"]]
    for metric in CLAIM_METRICS:
        name = ORACLE_NAMES[metric]
        theirs = round(np.mean([result.metrics[name] for result in results]) * 100, 1)
        mine = round(np.mean([s[metric][0] for s in ours]) * 100, 1)
        assert mine == theirs == printed[name], metric
    assert (printed["precision"], printed["recall"], printed["f1"]) == (76.4, 62.5, 68.3)


# --- nuggets -------------------------------------------------------------------------------

def nugget(importance: str | None, assignment: str | None) -> dict[str, Any]:
    return {"text": "fact", "importance": importance, "assignment": assignment}


NUGGETS = {"nuggets": [
    nugget("vital", "support"),
    nugget("vital", "partial_support"),
    nugget("vital", "not_support"),
    nugget("okay", "support"),
    nugget("okay", "partial_support"),
]}
NUGGETS_EXPECTED = {
    "vital_strict": 1 / 3,  # 1 of 3 vital nuggets supported
    "vital": 1.5 / 3,  # (1 + 0.5) / 3
    "all_strict": 2 / 5,  # 2 of 5 supported
    "all": 3 / 5,  # (2 + 2 * 0.5) / 5
}
NO_VITAL = "no nugget is vital (nuggetizer scores 0)"
NO_NUGGETS = "no nuggets were created for the query (nuggetizer scores 0)"
VITAL = ("vital_strict", "vital")


def nugget_scores(details: Mapping[str, Any]) -> dict[str, tuple[float, str | None]]:
    return {metric: nugget_score(details, metric) for metric in NUGGET_METRICS}


def nugget_reasons(details: Mapping[str, Any]) -> dict[str, str | None]:
    return {metric: reason for metric, (_, reason) in nugget_scores(details).items()}


@pytest.mark.parametrize("metric", NUGGET_METRICS)
def test_nuggets_hand_computed(metric: str) -> None:
    assert nugget_score(NUGGETS, metric) == (NUGGETS_EXPECTED[metric], None)


def test_nuggets_unscored_cases() -> None:
    assert nugget_reasons({"nuggets": None}) == dict.fromkeys(NUGGET_METRICS,
                                                              "the nuggets were not created")
    assert nugget_reasons({"nuggets": None, "errors": {"nuggets": "creation failed"}}) == (
        dict.fromkeys(NUGGET_METRICS, "creation failed"))
    assert nugget_reasons({"nuggets": []}) == dict.fromkeys(NUGGET_METRICS, NO_NUGGETS)
    okay_only = {"nuggets": [nugget("okay", "support"), nugget("okay", "not_support")]}
    assert nugget_reasons(okay_only) == {**dict.fromkeys(VITAL, NO_VITAL),
                                         "all_strict": None, "all": None}
    assert nugget_score(okay_only, "all") == (0.5, None)
    for values in (nugget_scores({"nuggets": None}), nugget_scores(okay_only)):
        assert all(math.isnan(v) for m, (v, r) in values.items() if r is not None)


def test_nuggets_missing_labels() -> None:
    unrated = {"nuggets": [nugget("vital", "support"), nugget(None, "support")]}
    assert nugget_reasons(unrated) == {
        **dict.fromkeys(VITAL, "a nugget's importance was not labelled"),
        "all_strict": None, "all": None}
    unrated["errors"] = {"importance": "rating reply unreadable"}
    assert nugget_reasons(unrated)["vital"] == "rating reply unreadable"
    # An okay nugget's assignment is not needed by the vital scores.
    unassigned = {"nuggets": [nugget("vital", "support"), nugget("okay", None)]}
    assert nugget_reasons(unassigned) == {
        "vital_strict": None, "vital": None,
        **dict.fromkeys(("all_strict", "all"), "a nugget was not assigned against the answer")}
    unassigned["nuggets"][0]["assignment"] = None
    unassigned["errors"] = {"assignment": "assignment reply unreadable"}
    assert nugget_reasons(unassigned) == dict.fromkeys(NUGGET_METRICS,
                                                       "assignment reply unreadable")


def test_nuggets_unknown_metric_and_labels_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown nugget metric"):
        nugget_score(NUGGETS, "strict_vital_score")
    with pytest.raises(ValueError, match="unknown nugget assignment"):
        nugget_score({"nuggets": [nugget("vital", "supported")]}, "vital")
    with pytest.raises(ValueError, match="unknown nugget importance"):
        nugget_score({"nuggets": [nugget("Vital", "support")]}, "vital")


nugget_lists = st.lists(st.builds(nugget, st.sampled_from(("vital", "okay")),
                                  st.sampled_from(("support", "partial_support", "not_support"))),
                        max_size=8)


@pytest.mark.parity
@given(nuggets=nugget_lists)
@settings(max_examples=300, deadline=None)
def test_parity_with_nuggetizer_on_random_nuggets(
        nuggetizer: Callable[..., Any], nuggets: list[dict[str, Any]]) -> None:
    oracle = nuggetizer("q", nuggets)
    for metric, (value, reason) in nugget_scores({"nuggets": nuggets}).items():
        theirs = getattr(oracle, NUGGET_ORACLE_NAMES[metric])
        if reason is None:
            assert value.hex() == float(theirs).hex(), metric
        else:
            assert reason in (NO_NUGGETS, NO_VITAL), metric
            assert theirs == 0, metric
