"""Claim-level judging under faults (against the loopback judge) and with claims, verdicts and
nuggets supplied by the records. Data, helpers and the hand-predicted values of the clean run
are those of ``test_claim_metrics.py``."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import JudgeServer, claim_step, sentences
from test_claim_metrics import (
    ALL,
    CLAIMS,
    EXPECTED,
    NUGGETS,
    R1,
    R2,
    check_expected,
    check_row,
    judge,
    write_records,
)

from rageval.api import evaluate
from rageval.core.errors import InputError, UsageError
from rageval.judge.claims.claim_scores import PIECES
from rageval.judge.claims.steps import load_step, render_step
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.transport.client import JudgeError

CITATIONS = ["citations:recall", "citations:precision"]


def message(step: str, **inputs: list[str]) -> str:
    """The last user message of a request of ``step``, rendered as the pipelines render it."""
    return render_step(load_step(step), inputs)[-1]["content"]


def touching(*pieces: str) -> set[str]:
    """The claims metrics that read any of these pieces (``answer_claims.`` for a side)."""
    return {f"claims:{name}" for name, needs in PIECES.items()
            if any(p.startswith(piece) for p in needs for piece in pieces)}


Q1, ANSWER, REFERENCE = R1["query"], R1["answer"], R1["reference"]
D1, D2 = R1["contexts"][0]["text"], R1["contexts"][1]["text"]
A_CLAIMS, R_CLAIMS = sentences(ANSWER), sentences(REFERENCE)

# (fault, the request it hits, the metrics of r1 it leaves unscored, what the reason says)
FAULTS: dict[str, tuple[str, Callable[[], str], set[str], str]] = {
    "extract-answer-prose": (
        "prose", lambda: message("extract_claims", query=[Q1], text=[ANSWER]),
        touching("answer_claims."),
        "extracting the claims of the answer: judge reply not usable: no JSON object"),
    "check-reference-bad_json": (
        "bad_json", lambda: message("check_claims", query=[Q1], evidence=[REFERENCE],
                                    claims=A_CLAIMS),
        touching("answer_claims.reference"),
        "checking the claims of the answer against the reference: judge reply not usable"),
    "check-context-out_of_range": (
        "out_of_range", lambda: message("check_claims", query=[Q1], evidence=[D1],
                                        claims=R_CLAIMS),
        touching("reference_claims.contexts"),
        "checking the claims of the reference against context d1: judge reply not usable: "
        "'verdicts' item 1 is \"maybe\", not one of entailment, neutral, contradiction"),
    "check-answer-quoted_verdict": (
        "quoted_verdict", lambda: message("check_claims", query=[Q1], evidence=[ANSWER],
                                          claims=R_CLAIMS),
        touching("reference_claims.answer"),
        "checking the claims of the reference against the answer: judge reply not usable: "
        "the reply holds conflicting verdicts"),
    "check-context-wrong_count": (
        "wrong_count", lambda: message("check_claims", query=[Q1], evidence=[D2],
                                       claims=A_CLAIMS),
        touching("answer_claims.contexts"),
        "checking the claims of the answer against context d2: judge reply not usable: "
        "'verdicts' has no label for item 3 (of 3)"),
    "extract-reference-500": (
        "500", lambda: message("extract_claims", query=[Q1], text=[REFERENCE]),
        touching("reference_claims."),
        "extracting the claims of the reference: judge request failed: HTTP 500"),
    "nuggets-create-500": (
        "500", lambda: message("nuggets_create", query=[Q1], sources=[REFERENCE]),
        set(NUGGETS), "creating the nuggets: judge request failed: HTTP 500"),
    "nuggets-importance-bad_json": (
        "bad_json", lambda: message("nuggets_importance", query=[Q1], nuggets=R_CLAIMS),
        {"nuggets:vital_strict", "nuggets:vital"},
        "labelling the nuggets' importance: judge reply not usable"),
    "nuggets-assign-prose": (
        "prose", lambda: message("nuggets_assign", query=[Q1], answer=[ANSWER],
                                 nuggets=R_CLAIMS),
        set(NUGGETS), "labelling the nuggets' assignment: judge reply not usable"),
    "citations-supported-wrong_count": (
        "wrong_count", lambda: message("check_claims", query=[Q1], evidence=[D1],
                                       claims=["The company is based in Oslo."]),
        set(CITATIONS), "checking statements against the passages it cites: judge reply not "
                        "usable: 'verdicts' has no label for item 1 (of 1)"),
    "citations-alone-out_of_range": (
        "out_of_range", lambda: message("check_claims", query=[Q1], evidence=[D2],
                                        claims=["It builds ship navigation systems."]),
        {"citations:precision"},
        "checking statements against each cited passage alone: judge reply not usable"),
}
# What a rerun asks again after an HTTP failure: the failed request and the requests built
# on its reply (the reference's claims: against the answer and the two contexts; nuggets:
# importance and assignment).
REASKED = {"extract-reference-500": 4, "nuggets-create-500": 3}


def test_the_fault_table_covers_the_pieces() -> None:
    assert touching("answer_claims.") == {
        "claims:precision", "claims:f1", "claims:noise_sensitivity.relevant",
        "claims:noise_sensitivity.irrelevant", "claims:hallucination",
        "claims:self_knowledge", "claims:faithfulness"}
    assert touching("reference_claims.answer") == {"claims:recall", "claims:f1",
                                                   "claims:context_utilization"}
    assert sorted({fault for fault, *_ in FAULTS.values()}) == [
        "500", "bad_json", "out_of_range", "prose", "quoted_verdict", "wrong_count"]


def _kind_of(case: str) -> list[str]:
    """The metrics a fault case runs: every metric for the first case (the other kinds are
    untouched), the fault's kind for the others (fewer rounds, a faster test)."""
    if case == "extract-answer-prose":
        return ALL
    return {"check": CLAIMS, "extract": CLAIMS, "nuggets": NUGGETS,
            "citations": CITATIONS}[case.split("-")[0]]


@pytest.mark.parametrize("case", list(FAULTS))
def test_a_fault_leaves_exactly_its_metrics_unscored(case: str, tmp_path: Path) -> None:
    fault, target, affected, reason = FAULTS[case]
    names = _kind_of(case)
    path = write_records(tmp_path / "r.jsonl", [R1, R2])
    cache = tmp_path / "c.sqlite"
    with JudgeServer() as server:
        server.fail_for(target(), fault)
        res = evaluate(path, names, judge=judge(server, cache), bootstrap=10)
        assert server.faults_served.count(fault) == 1  # the message matched one request
        first = server.requests
        r1, r2 = res.records
        assert affected <= set(names)
        for name in affected:
            assert r1.scores[name] is None, name
            assert reason in r1.errors[name], (name, r1.errors[name])
        check_row(r1, EXPECTED["r1"], [n for n in names if n not in affected])
        check_row(r2, EXPECTED["r2"])
        assert res.manifest["claims"]["failed"] == (1 if fault == "500" else 0)

        again = evaluate(path, names, judge=judge(server, cache), bootstrap=10)
        if case in REASKED:  # failed requests are not cached: asked again, and only they
            assert server.requests - first == REASKED[case]
            check_expected(again, EXPECTED)
        else:  # an unusable reply is kept (as the rubric judge keeps it): replayed as is
            assert server.requests == first
            assert [r.errors for r in again.records] == [r.errors for r in res.records]


def test_a_500_outlasting_one_retry(tmp_path: Path) -> None:
    """The record whose request failed is unscored, the run goes on (the judge answered the
    other record: a judge answering nothing would stop the run), and a rerun asks again."""
    path = write_records(tmp_path / "r.jsonl", [R1, R2])
    target = message("extract_claims", query=[Q1], text=[ANSWER])
    with JudgeServer() as server:
        server.fail_for(target, "500", "500", "500")
        res = evaluate(path, ["claims:precision"],
                       judge=judge(server, tmp_path / "c.sqlite", max_retries=1), bootstrap=10)
        assert server.faults_served.count("500") == 2  # the first try and one retry
        assert res.records[0].scores["claims:precision"] is None
        assert res.records[0].errors["claims:precision"].startswith(
            "extracting the claims of the answer: judge request failed: HTTP 500")
        again = evaluate(path, ["claims:precision"],
                         judge=judge(server, tmp_path / "c.sqlite", max_retries=1),
                         bootstrap=10)
        assert server.faults_served.count("500") == 3  # the third: retried, then answered
        assert again.records[0].scores["claims:precision"] == pytest.approx(2 / 3)


def test_every_reply_unusable(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", [R1, R2])
    with JudgeServer() as server:
        server.always = "prose"
        res = evaluate(path, ALL, judge=judge(server, tmp_path / "c.sqlite"), bootstrap=10)
        # Nothing past the first round: 4 extractions, 4 nugget lists, 5 citation checks.
        assert server.requests == 13
        assert {claim_step(JudgeServer.system_message(b)) for b in server.bodies} == {
            "extract", "nuggets", "check"}
    for row in res.records:
        for name in ALL:
            assert row.scores[name] is None, (row.id, name)
            assert "judge reply not usable: no JSON object in the reply" in row.errors[name]
        assert row.errors["claims:recall"].startswith("extracting the claims of the reference")
        assert row.errors["nuggets:all"].startswith("creating the nuggets")
        assert row.errors["citations:precision"].startswith(
            "checking statements against the passages it cites")
    assert all(s.value is None and s.unscored == 2 for s in res.summary.values())


def test_an_endpoint_failing_everything_stops_the_run(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", [R1, R2])
    with JudgeServer() as server:
        server.always = "500"
        with pytest.raises(JudgeError, match="HTTP 500"):
            evaluate(path, CLAIMS, judge=judge(server, tmp_path / "c.sqlite"), bootstrap=10)


# ---- records the pipelines cannot fully judge ----------------------------------------------


def test_no_claims_no_contexts_no_answer_are_unscored_with_reasons(tmp_path: Path) -> None:
    sky = "The sky is blue."
    records = [
        # an answer with no letter: no claims (RAGChecker would score 0)
        {"id": "e1", "query": "Colour one?", "answer": "...", "reference": sky,
         "contexts": [{"id": "k", "text": sky}]},
        # no contexts; answer and reference are the same text: one extraction, one check
        {"id": "e2", "query": "Colour two?", "answer": sky, "reference": sky, "contexts": []},
        # no answer
        {"id": "e3", "query": "Colour three?", "reference": sky,
         "contexts": [{"id": "k", "text": sky}]},
    ]
    path = write_records(tmp_path / "r.jsonl", records)
    with JudgeServer() as server:
        res = evaluate(path, CLAIMS, judge=judge(server, tmp_path / "c.sqlite"), bootstrap=10)
        # e1: 2 extractions, the reference's claim against the answer and k; e2: 1 + 1; e3:
        # the reference's extraction and its check against k
        assert server.requests == 4 + 2 + 2
    no_claims = "the answer has no claims (RAGChecker scores 0)"
    no_contexts = "the record has no contexts (RAGChecker scores 0)"
    no_answer = "no answer to take claims from"
    no_answer_check = "no answer to check the claims of the reference against"
    expected: dict[str, dict[str, float | str]] = {
        "e1": {"precision": no_claims, "recall": 0.0, "f1": no_claims, "claim_recall": 1.0,
               "context_precision": 1.0, "context_utilization": 0.0,
               "noise_sensitivity.relevant": no_claims,
               "noise_sensitivity.irrelevant": no_claims, "hallucination": no_claims,
               "self_knowledge": no_claims, "faithfulness": no_claims},
        "e2": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "claim_recall": no_contexts,
               "context_precision": no_contexts, "context_utilization": no_contexts,
               "noise_sensitivity.relevant": no_contexts,
               "noise_sensitivity.irrelevant": no_contexts, "hallucination": no_contexts,
               "self_knowledge": no_contexts, "faithfulness": no_contexts},
        "e3": {"precision": no_answer, "recall": no_answer_check, "f1": no_answer,
               "claim_recall": 1.0, "context_precision": 1.0,
               "context_utilization": no_answer_check,
               **dict.fromkeys(["noise_sensitivity.relevant", "noise_sensitivity.irrelevant",
                                "hallucination", "self_knowledge", "faithfulness"],
                               no_answer)},
    }
    check_expected(res, {rid: {f"claims:{k}": v for k, v in row.items()}
                         for rid, row in expected.items()})


# ---- supplied claims and nuggets -----------------------------------------------------------

SUPPLIED = {
    "id": "s1", "query": "Which claims hold?", "answer": "The answer.", "reference": "The ref.",
    "contexts": [{"id": "c1", "text": "First passage."}, {"id": "c2", "text": "Second one."}],
    "claims": {
        "answer": [
            {"text": "A one", "reference": "entailment",
             "contexts": {"c1": "entailment", "c2": "neutral"}},
            {"text": ["A", "two", "triplet"], "reference": "neutral", "contexts": ["c2"]},
            {"text": "A three", "reference": "contradiction", "contexts": []}],
        "reference": [
            {"text": "R one", "answer": "entailment", "contexts": ["c1"]},
            {"text": "R two", "answer": False, "contexts": {"c1": "neutral", "c2": False}}]},
    "nuggets": [{"text": "N1", "importance": "vital", "assignment": "support"},
                {"text": "N2", "importance": "Vital", "assignment": "partial_support"},
                {"text": "N3", "importance": "okay", "assignment": "support"},
                {"text": "N4", "importance": "okay", "assignment": "not_support"}],
}
# A1 in the reference and c1; A2 only in c2 (irrelevant: it entails no reference claim); A3
# nowhere (a contradiction is not an entailment). R1 in the answer and c1; R2 nowhere.
SUPPLIED_VALUES = {
    "claims:precision": 1 / 3, "claims:recall": 1 / 2, "claims:f1": 0.4,
    "claims:claim_recall": 1 / 2, "claims:context_precision": 1 / 2,
    "claims:context_utilization": 1.0, "claims:noise_sensitivity.relevant": 0.0,
    "claims:noise_sensitivity.irrelevant": 1 / 3, "claims:hallucination": 1 / 3,
    "claims:self_knowledge": 0.0, "claims:faithfulness": 2 / 3,
    # vital: N1 support, N2 partial; all: 2 supports and a partial of 4
    "nuggets:vital_strict": 0.5, "nuggets:vital": 0.75, "nuggets:all_strict": 0.5,
    "nuggets:all": 0.625,
}


@pytest.mark.parametrize("options", [None, JudgeOptions()], ids=["no-judge", "bare-options"])
def test_supplied_claims_and_nuggets_need_no_judge(options: JudgeOptions | None,
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = write_records(tmp_path / "s.jsonl", [SUPPLIED])
    res = evaluate(path, [*CLAIMS, *NUGGETS], judge=options, bootstrap=10)
    row = res.records[0]
    assert row.errors == {}
    for name, want in SUPPLIED_VALUES.items():
        assert row.scores[name] == pytest.approx(want, abs=1e-12), name
    for name in [*CLAIMS, *NUGGETS]:
        assert "|from:record|" in res.summary[name].signature
    claims = row.details["claims"]
    assert set(claims["sources"].values()) == {"record"} and claims["replies"] == 0
    assert claims["answer_claims"][1] == {"text": "A two triplet", "reference": "neutral",
                                          "contexts": {"c1": "neutral", "c2": "entailment"}}
    assert claims["answer_claims"][2]["contexts"] == {"c1": "neutral", "c2": "neutral"}
    assert claims["reference_claims"][1]["answer"] == "neutral"  # false reads as neutral
    assert row.details["nuggets"]["nuggets"][1]["importance"] == "vital"
    section = res.manifest["claims"]
    assert section["requests"] == 0 and section["cache"]["misses"] == 0
    assert not (tmp_path / ".rageval").exists()  # no cache was opened


def test_supplied_empty_lists_are_signed_and_worded_as_supplied(tmp_path: Path) -> None:
    record = {**SUPPLIED, "claims": {**SUPPLIED["claims"], "answer": []}, "nuggets": []}
    res = evaluate(write_records(tmp_path / "s.jsonl", [record]), [*CLAIMS, *NUGGETS],
                   bootstrap=10)
    row = res.records[0]
    for name in [*CLAIMS, *NUGGETS]:
        signature = res.summary[name].signature
        assert "|from:record|" in signature and "judge:none" in signature, name
    assert set(row.details["claims"]["sources"].values()) == {"record"}
    assert set(row.details["nuggets"]["sources"].values()) == {"record"}
    assert row.errors["claims:precision"] == "the answer has no claims (RAGChecker scores 0)"
    assert row.errors["nuggets:vital_strict"] == \
        "the record supplies an empty list of nuggets (nuggetizer scores 0)"
    assert res.manifest["claims"]["requests"] == 0


def test_supplied_claims_in_a_csv_cell(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "query", "answer", "reference", "contexts", "claims",
                         "nuggets"])
        writer.writerow([SUPPLIED["id"], SUPPLIED["query"], SUPPLIED["answer"],
                         SUPPLIED["reference"], json.dumps(SUPPLIED["contexts"]),
                         json.dumps(SUPPLIED["claims"]), json.dumps(SUPPLIED["nuggets"])])
    res = evaluate(path, [*CLAIMS, *NUGGETS], bootstrap=10)
    for name, want in SUPPLIED_VALUES.items():
        assert res.records[0].scores[name] == pytest.approx(want, abs=1e-12), name


def test_claims_given_as_texts_only_cost_only_the_checks(tmp_path: Path) -> None:
    record = dict(R1, claims={"answer": ["The company is based in Oslo.",
                                         "Bananas grow in warm climates."],
                              "reference": ["The company builds ship navigation systems."]})
    path = write_records(tmp_path / "r.jsonl", [record])
    with JudgeServer() as server:
        res = evaluate(path, CLAIMS, judge=judge(server, tmp_path / "c.sqlite"), bootstrap=10)
        # (1 + k) * (ceil(a / 10) + ceil(r / 10)) with a = 2, r = 1, k = 2; no extraction
        assert server.requests == 3 * 2
        assert {claim_step(JudgeServer.system_message(b)) for b in server.bodies} == {"check"}
    row = res.records[0]
    # Oslo is in the reference and d1, the bananas only in d2 (irrelevant); the reference's
    # one claim is in the answer and d1.
    assert row.scores["claims:precision"] == 0.5 and row.scores["claims:recall"] == 1.0
    assert row.scores["claims:noise_sensitivity.irrelevant"] == 0.5
    assert row.scores["claims:faithfulness"] == 1.0
    sources = row.details["claims"]["sources"]
    assert sources["answer_claims"] == sources["reference_claims"] == "record"
    assert sources["answer_claims.contexts"] == "judge"
    assert "|from:judge+record|" in res.summary["claims:precision"].signature


def test_nuggets_given_as_texts_only_cost_only_their_labels(tmp_path: Path) -> None:
    record = dict(R1, nuggets=R_CLAIMS)  # the reference's sentences, as the judge makes them
    path = write_records(tmp_path / "r.jsonl", [record])
    with JudgeServer() as server:
        res = evaluate(path, ["nuggets:all"], judge=judge(server, tmp_path / "a.sqlite"),
                       bootstrap=10)
        assert server.requests == 1  # the assignment only
        assert res.records[0].scores["nuggets:all"] == pytest.approx(2 / 3)
        res = evaluate(path, ["nuggets:vital_strict"],
                       judge=judge(server, tmp_path / "b.sqlite"), bootstrap=10)
        assert server.requests == 1 + 2  # importance and assignment
        assert res.records[0].scores["nuggets:vital_strict"] == 1.0
    assert res.records[0].details["nuggets"]["source"] == "record"


def test_partial_supply_without_a_model_is_a_usage_error(tmp_path: Path) -> None:
    record = dict(R1, claims={"answer": ["The company is based in Oslo."]})
    path = write_records(tmp_path / "r.jsonl", [record])
    with pytest.raises(UsageError):
        evaluate(path, ["claims:precision"], judge=JudgeOptions(), bootstrap=10)


_BAD_BASE = {"id": "bad", "query": "q?", "answer": "An answer.", "reference": "A reference.",
             "contexts": [{"id": "c1", "text": "One."}, {"id": "c2", "text": "Two."}]}
INVALID = {
    "unknown-context-id": ({"claims": {"answer": [{"text": "A", "contexts": ["c9"]}]}},
                           "claims.answer[0].contexts", "names 'c9', not a context id"),
    "context-map-lacks-one": ({"claims": {"answer": [{"text": "A",
                                                      "contexts": {"c1": "entailment"}}]}},
                              "claims.answer[0].contexts", "lacks context 'c2'"),
    "verdict-not-a-label": ({"claims": {"answer": [{"text": "A", "reference": "maybe"}]}},
                            "claims.answer[0].reference",
                            "must be one of entailment, neutral, contradiction"),
    "verdict-for-some-only": ({"claims": {"reference": [{"text": "R", "answer": "neutral"},
                                                        "S"]}},
                              "claims.reference[1]", "has no 'answer' while others do"),
    "claims-not-a-list": ({"claims": {"answer": "A"}}, "claims.answer",
                          "must be a list of claims"),
    "claims-not-an-object": ({"claims": ["A"]}, "claims", "must be an object"),
    "unknown-side": ({"claims": {"answers": []}}, "claims.answers", "unknown side"),
    "empty-claim": ({"claims": {"answer": ["  "]}}, "claims.answer[0]",
                    "must be a non-empty text"),
    "importance-for-some-only": ({"nuggets": [{"text": "N1", "importance": "vital"},
                                              {"text": "N2"}]},
                                 "nuggets[1]", "has no 'importance' while others do"),
    "nuggets-not-a-list": ({"nuggets": {"text": "N1"}}, "nuggets",
                           "must be a list of nuggets"),
    "assignment-not-a-label": ({"nuggets": [{"text": "N1", "assignment": "yes"}]},
                               "nuggets[0].assignment",
                               "must be one of support, partial_support, not_support"),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_supplied_data_stops_before_any_request(case: str, tmp_path: Path) -> None:
    extra, field, words = INVALID[case]
    path = write_records(tmp_path / "r.jsonl", [R1, {**_BAD_BASE, **extra}])
    cache = tmp_path / "c.sqlite"
    with JudgeServer() as server:
        with pytest.raises(InputError) as caught:
            evaluate(path, [*CLAIMS, *NUGGETS], judge=judge(server, cache), bootstrap=10)
        assert server.requests == 0
    error = caught.value
    assert error.field == field
    assert "record 'bad'" in str(error) and words in str(error)
    assert not cache.exists()
