"""Claim-level judging end to end (``claims:*``, ``nuggets:*``, ``citations:*``) against the
loopback judge (real HTTP): scored values predicted from the server's scripted rules, offline
replay, cache misses, recomputation from ``records.jsonl``, request economy and the CLI.

Faults and claims supplied with the records are in ``test_claim_metrics_faults.py``.

The scripted judge (``tests/judge_server.py``): claims and nuggets are the sentences of a text;
a claim is entailed when >= 60% of its content words (``\\w+`` of 3+ characters) are in the
evidence, contradicted when it holds a number the evidence lacks while the evidence holds
some; the first ceil(N/2) nuggets of a request are vital; a nugget is supported by an answer
holding >= 60% of its content words, partially >= 30%. The records below keep digits out of
the texts except where a contradiction is wanted.
"""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import JudgeServer, claim_step, sentences

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import InputError, UsageError
from rageval.core.names import parse
from rageval.core.results import Results
from rageval.judge.claims import claim_pipeline
from rageval.judge.claims.citation_scores import citation_score
from rageval.judge.claims.claim_scores import CLAIM_METRICS, claim_score
from rageval.judge.claims.nugget_scores import NUGGET_METRICS, nugget_score
from rageval.judge.llm.checks import OfflineCacheMiss
from rageval.judge.llm.options import JudgeOptions

CLAIMS = [f"claims:{t}" for t in CLAIM_METRICS]
NUGGETS = [f"nuggets:{t}" for t in NUGGET_METRICS]
ALL = [*CLAIMS, *NUGGETS, "nuggets:all(source=contexts)", "citations:recall",
       "citations:precision"]
MODEL = "claim-judge"

R1 = {"id": "r1", "query": "Where is the company based?",
      "contexts": [{"id": "d1", "text": "The company is based in Oslo. It builds ship "
                                         "navigation systems."},
                   {"id": "d2", "text": "Bananas grow in warm tropical climates."}],
      "answer": "The company is based in Oslo [1]. It builds ship navigation systems [1][2]. "
                "Bananas grow in warm climates [d2].",
      "reference": "The company is based in Oslo. The company builds ship navigation systems. "
                   "It was founded by two engineers.",
      "judgments": {"d1": 2, "d2": 0}}
R2 = {"id": "r2", "query": "How many people work there?",
      "contexts": [{"id": "a", "text": "The annual report lists 420 employees."},
                   {"id": "b", "text": "Most employees work at the head office in Bergen."}],
      "answer": "About 4000 people work there [a]. Most of them work in Bergen [2]. "
                "Salaries are high [7].",
      "reference": "The company has 420 employees. Most employees work at the head office.",
      "judgments": {"a": 1, "b": 1}}
R3 = {"id": "r3", "query": "What is the capital of France?",  # no reference, no judgments
      "contexts": ["Paris is the capital of France.", "The Eiffel Tower stands in Paris."],
      "answer": "Paris is the capital of France [1]. The tower is tall [2]."}
R4 = {"id": "r4", "query": "What colour is the sky?",  # no citation; nothing judged relevant
      "contexts": [{"id": "s1", "text": "The sky looks blue on a clear day."}],
      "answer": "The sky is blue.", "reference": "The sky is blue on clear days.",
      "judgments": {"s1": 0}}
RECORDS = [R1, R2, R3, R4]

NO_REF_CHECK = "no reference to check the claims of the answer against"
NO_REF_CLAIMS = "no reference to take claims from"
_CLAIM_ORDER = CLAIM_METRICS  # precision ... faithfulness

# Values predicted by hand from the scripted rules (a string: unscored, with this reason).
#
# r1: answer claims A1 "...Oslo [1]." A2 "...systems [1][2]." A3 "Bananas grow..."; reference
#     claims R1 Oslo, R2 systems, R3 "founded by two engineers". A1, A2 are in the reference
#     and d1; A3 only in d2. R1, R2 in the answer and d1; R3 nowhere. Relevant contexts: d1.
#     precision 2/3, recall 2/3, f1 2/3, claim_recall 2/3, context_precision 1/2 (d2 holds no
#     reference claim), utilization 2/2, noise (relevant) 0, noise (irrelevant) 1/3 (A3 only in
#     d2 and not in the reference), hallucination 0, self_knowledge 0, faithfulness 3/3.
#     Nuggets = reference sentences, first 2 of 3 vital; R3 not supported: vital 2/2, all 2/3.
#     Citations: "[1][2]" statement is supported by d1+d2 and by d1 alone, not by d2 alone,
#     and still supported without d2: d2 is unnecessary, precision (1 + 1 + 0 + 1) / 4.
# r2: the number rule: "4000" and the markers "[2]", "[7]" hold numbers the reference ("420")
#     lacks, so every answer claim contradicts it and context a; "Most of them work in Bergen"
#     is entailed by b. R1 ("420") contradicts the answer, R2 overlaps it 2/6 (neutral); R1 in
#     a, R2 in b. precision 0, recall 0, f1 0 (a value), claim_recall 1, context_precision 1,
#     utilization 0/2, noise (relevant) 1/3, irrelevant 0 (every context relevant),
#     hallucination 2/3, self_knowledge 0, faithfulness 1/3. Nuggets: "420 employees" (vital)
#     not supported, "head office" (okay) 2/6 partial: vital 0, all_strict 0, all 0.5/2.
#     Citations: "[7]" is invalid (two contexts), "[a]" statement contradicted, "[2]" supported:
#     recall 1/3, precision 1/2 (the invalid statement counts no citation).
# r3: no reference: only faithfulness (both claims in their context); citations 2/2.
# r4: one claim everywhere entailed; the answer cites nothing: recall 0, precision unscored.
EXPECTED: dict[str, dict[str, float | str]] = {
    "r1": {**dict(zip(_CLAIM_ORDER, [2 / 3, 2 / 3, 2 / 3, 2 / 3, 0.5, 1.0, 0.0, 1 / 3, 0.0,
                                     0.0, 1.0], strict=True)),
           "nuggets:vital_strict": 1.0, "nuggets:vital": 1.0, "nuggets:all_strict": 2 / 3,
           "nuggets:all": 2 / 3, "nuggets:all(source=contexts)": 1.0,
           "citations:recall": 1.0, "citations:precision": 0.75},
    "r2": {**dict(zip(_CLAIM_ORDER, [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1 / 3, 0.0, 2 / 3, 0.0,
                                     1 / 3], strict=True)),
           "nuggets:vital_strict": 0.0, "nuggets:vital": 0.0, "nuggets:all_strict": 0.0,
           "nuggets:all": 0.25, "nuggets:all(source=contexts)": 0.25,
           "citations:recall": 1 / 3, "citations:precision": 0.5},
    "r3": {"precision": NO_REF_CHECK, "recall": NO_REF_CLAIMS, "f1": NO_REF_CHECK,
           "claim_recall": NO_REF_CLAIMS, "context_precision": NO_REF_CLAIMS,
           "context_utilization": NO_REF_CLAIMS, "noise_sensitivity.relevant": NO_REF_CHECK,
           "noise_sensitivity.irrelevant": NO_REF_CHECK, "hallucination": NO_REF_CHECK,
           "self_knowledge": NO_REF_CHECK, "faithfulness": 1.0,
           **dict.fromkeys(NUGGETS, "no reference to create nuggets from"),
           "nuggets:all(source=contexts)": "no judgments to tell the relevant contexts",
           "citations:recall": 1.0, "citations:precision": 1.0},
    "r4": {**dict(zip(_CLAIM_ORDER, [1.0] * 6 + [0.0] * 4 + [1.0], strict=True)),
           **dict.fromkeys(NUGGETS, 1.0),
           "nuggets:all(source=contexts)": "no context is judged relevant",
           "citations:recall": 0.0, "citations:precision": "the answer cites no context"},
}
for _row in EXPECTED.values():  # claim metric names in full
    for _t in CLAIM_METRICS:
        if _t in _row:
            _row[f"claims:{_t}"] = _row.pop(_t)
# Requests of the run (fresh cache): claims 8 (r1) + 8 (r2) + 3 (r3: its answer, against 2
# contexts) + 6 (r4); nuggets 3 + 3 + 3 from references, 2 + 2 from contexts; citations 5 (r1:
# 3 cited-passage sets, 2 passages alone; "without d2" is the "d1 alone" request again, a cache
# hit) + 2 + 2 (r4 cites nothing).
REQUESTS = 25 + 13 + 9


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def judge(server: JudgeServer | None, cache: Path, **kw: Any) -> JudgeOptions:
    base: dict[str, Any] = {"model": MODEL, "cache": str(cache), "timeout": 5.0,
                            "max_retries": 0}
    if server is not None:
        base["base_url"] = server.base_url
    return JudgeOptions(**{**base, **kw})


def check_row(row: Any, expected: dict[str, float | str], names: list[str] | None = None
              ) -> None:
    """The row's values of ``names`` (default: all it has) are the expected ones."""
    for name in row.scores if names is None else names:
        want = expected[name]
        if isinstance(want, str):
            assert row.scores[name] is None, (row.id, name)
            assert want in row.errors[name], (row.id, name, row.errors[name])
        else:
            assert row.scores[name] == pytest.approx(want, abs=1e-12), (row.id, name)
            assert name not in row.errors, (row.id, name)


def check_expected(results: Results, expected: dict[str, dict[str, float | str]]) -> None:
    for row in results.records:
        check_row(row, expected[row.id])


@pytest.fixture(scope="module")
def online(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One online run of every metric over RECORDS, with a fresh cache."""
    tmp = tmp_path_factory.mktemp("online")
    path = write_records(tmp / "records.jsonl", RECORDS)
    cache = tmp / "cache.sqlite"
    with JudgeServer() as server:
        results = evaluate(path, ALL, judge=judge(server, cache), bootstrap=50)
        yield {"results": results, "path": path, "cache": cache, "tmp": tmp,
               "requests": server.requests, "bodies": list(server.bodies),
               "base_url": server.base_url}


# ---- 1. every metric online --------------------------------------------------------------


def test_every_metric_online_matches_the_scripted_judge(online: dict[str, Any]) -> None:
    results: Results = online["results"]
    assert [r.id for r in results.records] == ["r1", "r2", "r3", "r4"]
    check_expected(results, EXPECTED)
    for row in results.records:  # every value on 0-1, or unscored with a reason
        assert set(row.scores) == set(ALL)
        for name, value in row.scores.items():
            if value is None:
                assert row.errors[name].strip()
            else:
                assert 0.0 <= value <= 1.0
    # Each step's requests, told apart by the system message.
    steps: dict[str | None, int] = {}
    for body in online["bodies"]:
        step = claim_step(JudgeServer.system_message(body))
        steps[step] = steps.get(step, 0) + 1
    assert online["requests"] == REQUESTS
    assert steps == {"extract": 7, "check": 18 + 9, "nuggets": 5, "importance": 3,
                     "assign": 5}
    section = results.manifest["claims"]
    assert section["requests"] == REQUESTS and section["failed"] == 0
    assert section["cache"]["stored"] == REQUESTS and section["cache"]["hits"] == 1
    assert section["model"] == MODEL and section["endpoint"] == online["base_url"]
    assert set(section["prompts"]) == {"extract_claims", "check_claims", "nuggets_create",
                                       "nuggets_importance", "nuggets_assign"}
    # replies per record: r1 8 + 3 + 2 + 6, r2 8 + 3 + 2 + 2, r3 3 + 2, r4 6 + 3
    assert section["replies_per_record"] == {"mean": 12.0, "max": 19}
    assert "judge" not in results.manifest  # the rubric judge's section is not involved


def test_summary_means_and_signatures(online: dict[str, Any]) -> None:
    summary = online["results"].summary
    assert summary["claims:precision"].value == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert summary["claims:precision"].n == 3 and summary["claims:precision"].unscored == 1
    assert summary["claims:precision"].reasons == {NO_REF_CHECK: 1}
    assert summary["claims:faithfulness"].n == 4
    assert summary["citations:precision"].value == pytest.approx((0.75 + 0.5 + 1) / 3)
    assert summary["nuggets:all(source=contexts)"].n == 2
    for name in ALL:
        sig = summary[name].signature
        assert sig.startswith(f"metric:{parse(name).base}|")
        assert f"|judge:{MODEL}|" in sig and f"|endpoint:{online['base_url']}|" in sig
        assert "|render:claims-2|" in sig and "|chunk:10|" in sig
        assert "|from:judge|" in sig
        assert summary[name].ci95 is not None
    assert "|extract_claims:1:" in summary["claims:f1"].signature
    assert "|check_claims:1:" in summary["claims:f1"].signature
    assert "|nuggets_assign:1:" in summary["nuggets:all"].signature
    assert "|source:contexts|" in summary["nuggets:all(source=contexts)"].signature
    assert "|max_citations:3|" in summary["citations:recall"].signature
    assert "extract_claims" not in summary["citations:recall"].signature


def test_details_are_written_once_per_kind(online: dict[str, Any]) -> None:
    results: Results = online["results"]
    for row in results.records:
        assert set(row.details) == {"claims", "nuggets", "nuggets(source=contexts)",
                                    "citations"}
    r1 = results.records[0].details
    claims = r1["claims"]
    assert claims["contexts"] == ["d1", "d2"]
    assert [c["text"] for c in claims["answer_claims"]] == sentences(R1["answer"])
    assert [c["text"] for c in claims["reference_claims"]] == sentences(R1["reference"])
    assert [c["reference"] for c in claims["answer_claims"]] == ["entailment", "entailment",
                                                                 "neutral"]
    assert claims["answer_claims"][2]["contexts"] == {"d1": "neutral", "d2": "entailment"}
    assert [c["answer"] for c in claims["reference_claims"]] == ["entailment", "entailment",
                                                                 "neutral"]
    assert claims["errors"] == {} and set(claims["sources"].values()) == {"judge"}
    assert claims["replies"] == 8 and claims["cached"] is False
    nuggets = r1["nuggets"]
    assert [(n["importance"], n["assignment"]) for n in nuggets["nuggets"]] == [
        ("vital", "support"), ("vital", "support"), ("okay", "not_support")]
    by_contexts = r1["nuggets(source=contexts)"]
    assert by_contexts["source"] == "contexts"
    assert [n["text"] for n in by_contexts["nuggets"]] == sentences(R1["contexts"][0]["text"])
    assert all(n["importance"] is None for n in by_contexts["nuggets"])  # not asked for
    statements = r1["citations"]["statements"]
    assert [s["cites"] for s in statements] == [["d1"], ["d1", "d2"], ["d2"]]
    assert statements[1]["text"] == "It builds ship navigation systems."
    assert statements[1]["alone"] == {"d1": True, "d2": False}
    assert statements[1]["without"] == {"d2": True}
    assert r1["citations"]["replies"] == 6
    r2 = results.records[1].details["citations"]["statements"]
    assert r2[2] == {"text": "Salaries are high.", "cites": [], "invalid": ["7"],
                     "supported": False, "alone": None, "without": None}
    r2_claims = results.records[1].details["claims"]["answer_claims"]
    assert [c["reference"] for c in r2_claims] == ["contradiction"] * 3
    r3 = results.records[2].details["claims"]
    assert r3["contexts"] == ["1", "2"] and r3["reference_claims"] is None
    assert r3["errors"] == {"reference_claims": NO_REF_CLAIMS,
                            "answer_claims.reference": NO_REF_CHECK}
    # One details object per kind in records.jsonl too, not one per metric.
    out = online["results"].write(online["tmp"] / "out-details")
    line = json.loads((out / "records.jsonl").read_text().splitlines()[0])
    assert set(line["details"]) == {"claims", "nuggets", "nuggets(source=contexts)",
                                    "citations"}
    assert line["details"]["claims"] == json.loads(json.dumps(claims))


# ---- 2. offline replay -----------------------------------------------------------------


def _without_cached(details: dict[str, Any]) -> dict[str, Any]:
    return {kind: {k: v for k, v in d.items() if k != "cached"} for kind, d in details.items()}


def test_offline_replay_reproduces_everything(online: dict[str, Any]) -> None:
    first: Results = online["results"]
    replay = evaluate(online["path"], ALL, judge=judge(None, online["cache"], offline=True),
                      bootstrap=50)
    assert [r.scores for r in replay.records] == [r.scores for r in first.records]
    assert [r.errors for r in replay.records] == [r.errors for r in first.records]
    assert ([_without_cached(r.details) for r in replay.records]
            == [_without_cached(r.details) for r in first.records])
    for name in ALL:
        a, b = first.summary[name], replay.summary[name]
        assert (b.value, b.n, b.unscored, b.ci95, b.signature, b.reasons) == (
            a.value, a.n, a.unscored, a.ci95, a.signature, a.reasons), name
    section = replay.manifest["claims"]
    assert section["requests"] == 0 and section["offline"] is True
    assert section["cache"]["misses"] == 0 and section["cache"]["hits"] == REQUESTS + 1
    assert section["endpoint"] is None
    assert all(d["cached"] for r in replay.records for d in r.details.values())


def test_batches_of_one_record_give_the_same_run(online: dict[str, Any]) -> None:
    first: Results = online["results"]
    small = evaluate(online["path"], ALL, judge=judge(None, online["cache"], offline=True),
                     bootstrap=50, batch_size=1)
    assert [r.scores for r in small.records] == [r.scores for r in first.records]
    assert small.manifest["claims"]["cache"]["misses"] == 0
    assert small.manifest["claims"]["cache"]["hits"] == REQUESTS + 1  # each asked once


# ---- 3. offline misses -----------------------------------------------------------------


def test_offline_with_no_cache_stops_before_anything(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", RECORDS)
    cache = tmp_path / "none.sqlite"
    with pytest.raises(OfflineCacheMiss) as caught:
        evaluate(path, ALL, judge=judge(None, cache, offline=True), bootstrap=50)
    message = str(caught.value)
    # What a replay needs first: 7 extractions, 5 nugget lists (3 from references, 2 from
    # contexts), 7 citation checks; the later rounds need their replies to be built.
    assert "19 of 19 judge replies are not in the cache" in message
    assert "r1 (extract_claims)" in message and "and 14 more" in message
    assert str(cache) in message and "(no such file)" in message
    assert not cache.exists()


def test_offline_miss_lists_later_rounds_built_from_the_cache(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", RECORDS)
    cache = tmp_path / "c.sqlite"
    with JudgeServer() as server:
        evaluate(path, ["claims:precision"], judge=judge(server, cache), bootstrap=10)
        # answers extracted (4), checked against the references (3: r3 has none)
        assert server.requests == 7
    with pytest.raises(OfflineCacheMiss) as caught:
        evaluate(path, ["claims:faithfulness"], judge=judge(None, cache, offline=True),
                 bootstrap=10)
    # The extractions are cached; the checks against each context are not: 2 + 2 + 2 + 1.
    message = str(caught.value)
    assert "7 of 11 judge replies are not in the cache" in message
    assert "r1 (check_claims), r1 (check_claims), r2 (check_claims)" in message
    assert "extract_claims" not in message


def test_offline_allow_missing_leaves_every_metric_unscored(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", [R1, R2])
    res = evaluate(path, ALL, judge=judge(None, tmp_path / "none.sqlite", offline=True,
                                          allow_missing=True), bootstrap=10)
    for row in res.records:
        for name in ALL:
            assert row.scores[name] is None, (row.id, name)  # never 0
            assert "not in the judge cache (offline)" in row.errors[name]
    r1 = res.records[0].errors
    assert r1["claims:precision"].startswith("extracting the claims of the answer: ")
    assert r1["claims:recall"].startswith("extracting the claims of the reference: ")
    assert r1["nuggets:all"].startswith("creating the nuggets: ")
    assert r1["citations:recall"].startswith("checking statements against the passages")
    assert all(s.value is None and s.n == 0 for s in res.summary.values())
    assert res.manifest["claims"]["requests"] == 0
    assert not (tmp_path / "none.sqlite").exists()


def test_offline_miss_with_judgments_from_the_judge(tmp_path: Path) -> None:
    records = [{k: v for k, v in r.items() if k != "judgments"} for r in (R1, R2)]
    path = write_records(tmp_path / "r.jsonl", records)
    cache = tmp_path / "c.sqlite"
    with JudgeServer() as server:  # the judgments only (context_relevance, 2 + 2 contexts)
        evaluate(path, ["ndcg@3"], judge=judge(server, cache), judgments_from="judge",
                 bootstrap=10)
        assert server.requests == 4
    with pytest.raises(OfflineCacheMiss, match="nuggets_create"):
        evaluate(path, ["nuggets:all(source=contexts)"], judge=judge(None, cache, offline=True),
                 judgments_from="judge", bootstrap=10)


# ---- 4. recomputing every value from records.jsonl ----------------------------------------


def recompute(name: str, details: dict[str, Any]) -> tuple[float, str | None]:
    kind, target = parse(name).base.split(":")
    formula = {"claims": claim_score, "nuggets": nugget_score,
               "citations": citation_score}[kind]
    return formula(details[_details_key(name)], target)


def _details_key(name: str) -> str:
    kind, rest = name.split(":", 1)
    return kind + (rest[rest.index("("):] if "(" in rest else "")


def test_every_value_recomputes_from_records_jsonl(online: dict[str, Any]) -> None:
    out = online["results"].write(online["tmp"] / "out")
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    checked = 0
    for row in rows:
        for name in ALL:
            value, reason = recompute(name, row["details"])
            stored = row["scores"][name]
            if stored is None:
                assert math.isnan(value) and reason == row["errors"][name], (row["id"], name)
            else:
                assert value == stored and reason is None, (row["id"], name)
            checked += 1
    assert checked == 4 * len(ALL)
    loaded = Results.load(out)  # unscored comes back as NaN
    for back, row in zip(loaded.records, online["results"].records, strict=True):
        assert back.scores.keys() == row.scores.keys()
        for name, value in row.scores.items():
            assert (math.isnan(back.scores[name]) if value is None
                    else back.scores[name] == value), (row.id, name)
        assert back.details == json.loads(json.dumps(row.details))


# ---- 7. request economy ----------------------------------------------------------------


FRUITS = ["Apples", "Pears", "Plums", "Grapes", "Melons", "Lemons", "Limes", "Figs", "Dates",
          "Kiwis", "Mangos", "Olives"]


def test_requests_equal_the_batched_bound(tmp_path: Path) -> None:
    # Twelve one-word answer claims: checked 10 + 2 per piece of evidence. The reference holds
    # figs, dates, kiwis and olives (claims 8, 9, 10 and 12: both chunks, so the verdicts of
    # the second land on claims 11 and 12); the contexts hold apples, pears and olives.
    record = {"id": "big", "query": "What fruit is sold?",
              "contexts": [{"id": "c1", "text": "Apples and pears."},
                           {"id": "c2", "text": "Olives grow here."}],
              "answer": " ".join(f"{fruit}." for fruit in FRUITS),
              "reference": "Kiwis and olives. Figs too. Dates as well."}
    path = write_records(tmp_path / "r.jsonl", [record])
    with JudgeServer() as server:
        res = evaluate(path, CLAIMS, judge=judge(server, tmp_path / "c.sqlite"), bootstrap=10)
        details = res.records[0].details["claims"]
        a, r = len(details["answer_claims"]), len(details["reference_claims"])
        assert (a, r) == (12, 3)
        batched, naive = claim_pipeline.requests_bound(a, r, 2)
        assert (batched, naive) == (2 + 3 * (2 + 1), 2 + 3 * 15)
        assert server.requests == batched < naive
        sizes = sorted(len(b["response_format"]["json_schema"]["schema"]["properties"]
                           ["verdicts"]["required"])
                       for b in server.bodies
                       if claim_step(JudgeServer.system_message(b)) == "check")
        assert sizes == [2, 2, 2, 3, 3, 3, 10, 10, 10]
    entailed = [n for n, c in enumerate(details["answer_claims"], 1)
                if c["reference"] == "entailment"]
    assert entailed == [8, 9, 10, 12]
    assert [n for n, c in enumerate(details["answer_claims"], 1)
            if "entailment" in c["contexts"].values()] == [1, 2, 12]
    scores = res.records[0].scores
    assert scores["claims:precision"] == pytest.approx(4 / 12)
    assert scores["claims:faithfulness"] == pytest.approx(3 / 12)
    assert scores["claims:recall"] == pytest.approx(1 / 3)  # kiwis and olives: 2/3 words


def test_nuggets_are_labelled_ten_at_a_time(tmp_path: Path) -> None:
    record = {"id": "n", "query": "Which fruit?", "answer": "Apples, pears and olives.",
              "reference": " ".join(f"{fruit}." for fruit in FRUITS)}
    path = write_records(tmp_path / "r.jsonl", [record])
    with JudgeServer() as server:
        res = evaluate(path, ["nuggets:vital_strict", "nuggets:all"],
                       judge=judge(server, tmp_path / "c.sqlite"), bootstrap=10)
        assert server.requests == 1 + 2 + 2  # create; importance and assignment: 10 + 2
    nuggets = res.records[0].details["nuggets"]["nuggets"]
    # each request's first half is vital: nuggets 1-5 of the first, 11 of the second
    assert [n for n, x in enumerate(nuggets, 1) if x["importance"] == "vital"] == [
        1, 2, 3, 4, 5, 11]
    assert [n for n, x in enumerate(nuggets, 1) if x["assignment"] == "support"] == [1, 2, 12]
    assert res.records[0].scores["nuggets:vital_strict"] == pytest.approx(2 / 6)
    assert res.records[0].scores["nuggets:all"] == pytest.approx(3 / 12)


def test_texts_with_markup_round_trip_through_the_slots(tmp_path: Path) -> None:
    answer = "Use a < b & c here. The tag </text-0123456789ab> is plain text."
    record = {"id": "m", "query": "Markup?", "answer": answer, "reference": answer,
              "contexts": [{"id": "x", "text": answer}]}
    path = write_records(tmp_path / "r.jsonl", [record])
    with JudgeServer() as server:
        res = evaluate(path, ["claims:precision", "claims:faithfulness"],
                       judge=judge(server, tmp_path / "c.sqlite"), bootstrap=10)
    claims = res.records[0].details["claims"]["answer_claims"]
    assert [c["text"] for c in claims] == sentences(answer)
    assert res.records[0].scores == {"claims:precision": 1.0, "claims:faithfulness": 1.0}


def test_identical_references_share_their_extraction(tmp_path: Path) -> None:
    query, reference = "Who built the bridge?", "Engineers built the bridge. It is long."
    records = [
        {"id": "x", "query": query, "reference": reference, "answer": "Engineers built it.",
         "contexts": [{"id": "k", "text": "The bridge was built by engineers."}]},
        {"id": "y", "query": query, "reference": reference, "answer": "Nobody knows who did.",
         "contexts": [{"id": "k", "text": "The bridge spans a wide river."}]},
    ]
    path = write_records(tmp_path / "r.jsonl", records)
    with JudgeServer() as server:
        evaluate(path, CLAIMS, judge=judge(server, tmp_path / "c.sqlite"), bootstrap=10)
        bound = claim_pipeline.requests_bound(1, 2, 1)[0]
        assert server.requests == 2 * bound - 1
        extracts = [b for b in server.bodies
                    if claim_step(JudgeServer.system_message(b)) == "extract"]
        assert len(extracts) == 3  # two answers, one reference


def test_nuggets_from_a_reference_are_shared_by_two_systems(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    first = write_records(tmp_path / "a.jsonl", [R1, R2])
    second = write_records(tmp_path / "b.jsonl", [
        dict(R1, answer="The company builds ship navigation systems."),
        dict(R2, answer="It has 420 employees.")])
    with JudgeServer() as server:
        evaluate(first, NUGGETS, judge=judge(server, cache), bootstrap=10)
        assert server.requests == 6  # per record: create, importance, assign
        res = evaluate(second, NUGGETS, judge=judge(server, cache), bootstrap=10)
        assert server.requests == 6 + 2  # the second system: its assignments only
    # r1: vital nuggets Oslo (not in the answer) and systems (supported): 1/2; r2: 420 held
    assert res.records[0].scores["nuggets:vital_strict"] == 0.5
    assert res.records[1].scores["nuggets:vital_strict"] == 1.0


# ---- signatures and step prompts ---------------------------------------------------------


def test_a_step_prompt_from_prompts_dir_is_signed_and_checked(tmp_path: Path) -> None:
    builtin = Path(__file__).resolve().parents[3] / "prompts" / "claims" / "check_claims.toml"
    mine = tmp_path / "prompts"
    mine.mkdir()
    (mine / "check_claims.toml").write_text(
        builtin.read_text(encoding="utf-8").replace('version = "1"', 'version = "2"'),
        encoding="utf-8")
    path = write_records(tmp_path / "r.jsonl", [R4])
    with JudgeServer() as server:
        res = evaluate(path, ["claims:precision"], bootstrap=10,
                       judge=judge(server, tmp_path / "c.sqlite", prompts_dir=str(mine)))
        assert server.requests == 2
        assert res.records[0].scores["claims:precision"] == 1.0
        sig = res.summary["claims:precision"].signature
        assert "|check_claims:2:" in sig and "|extract_claims:1:" in sig
        assert (res.manifest["claims"]["prompts"]["check_claims"]["source"]
                == str(mine / "check_claims.toml"))
        (mine / "extract_claims.toml").write_text(
            'id = "extract_claims"\nversion = "1"\ndescription = "d"\n'
            'template = "Split {text} into claims."\n', encoding="utf-8")
        with pytest.raises(InputError, match=r"placeholder \{query\}"):
            evaluate(path, ["claims:precision"], bootstrap=10,
                     judge=judge(server, tmp_path / "c.sqlite", prompts_dir=str(mine)))
        assert server.requests == 2  # refused before any request


def test_the_judge_seed_is_signed(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", [R4])
    with JudgeServer() as server:
        res = evaluate(path, ["claims:precision", "judge:fluency"], bootstrap=10,
                       judge=judge(server, tmp_path / "c.sqlite", seed=7))
        claim_bodies = [b for b in server.bodies if claim_step(JudgeServer.system_message(b))]
        assert len(claim_bodies) == 2 and all(b["seed"] == 7 for b in claim_bodies)
    assert "|seed:7|" in res.summary["judge:fluency"].signature
    assert "|seed:7|" in res.summary["claims:precision"].signature


# ---- 8. the command line ---------------------------------------------------------------

CLI_METRICS = ["-m", "claims:f1", "-m", "nuggets:vital_strict", "-m", "citations:recall"]
CLI_NAMES = ["claims:f1", "nuggets:vital_strict", "citations:recall"]
# claims: 2 extractions + 2 checks per full record (r3: its answer only, no check needed by
# f1); nuggets: 3 per record with a reference; citations: recall needs the first round only
# (3 + 2 + 2 cited-passage sets, none of the full run's "alone" checks).
CLI_REQUESTS = (4 + 4 + 1 + 4) + 3 * 3 + 7


def cli_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                   extra: list[str]) -> None:
    """Score online with the CLI, then replay offline; both runs' files agree."""
    path = write_records(tmp_path / "r.jsonl", RECORDS)
    cache, out, again = tmp_path / "c.sqlite", tmp_path / "out", tmp_path / "again"
    metrics = [*CLI_METRICS, *extra]
    with JudgeServer() as server:
        code = main(["score", str(path), *metrics, "--judge-model", MODEL,
                     "--judge-base-url", server.base_url, "--cache", str(cache),
                     "--out", str(out), "--no-progress"], stdout=io.StringIO())
        assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["r1", "r2", "r3", "r4"]
    assert {k: rows[0]["scores"][k] for k in CLI_NAMES} == {
        "claims:f1": pytest.approx(2 / 3), "nuggets:vital_strict": 1.0,
        "citations:recall": 1.0}
    assert {"claims", "nuggets", "citations"} <= set(rows[0]["details"])
    assert rows[0]["details"]["claims"]["answer_claims"][2]["reference"] == "neutral"
    assert rows[2]["errors"]["claims:f1"] == NO_REF_CHECK
    summary = json.loads((out / "summary.json").read_text())
    assert summary["manifest"]["claims"]["requests"] == CLI_REQUESTS
    assert f"|judge:{MODEL}|" in summary["metrics"]["claims:f1"]["signature"]

    code = main(["score", str(path), *metrics, "--judge-model", MODEL, "--offline",
                 "--cache", str(cache), "--out", str(again), "--no-progress"],
                stdout=io.StringIO())
    assert code == 0, capsys.readouterr().err
    replayed = [json.loads(line) for line in (again / "records.jsonl").read_text().splitlines()]
    assert [r["scores"] for r in replayed] == [r["scores"] for r in rows]
    assert [r["errors"] for r in replayed] == [r["errors"] for r in rows]
    summary2 = json.loads((again / "summary.json").read_text())
    assert summary2["manifest"]["claims"]["requests"] == 0
    for name in CLI_NAMES:
        assert summary2["metrics"][name]["signature"] == summary["metrics"][name]["signature"]
        assert summary2["metrics"][name]["ci95"] == summary["metrics"][name]["ci95"]
        assert summary2["metrics"][name]["value"] == summary["metrics"][name]["value"]


def test_cli_scores_then_replays_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    cli_round_trip(tmp_path, capsys, [])


def test_cli_round_trip_with_a_rubric_metric_beside(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # A rubric metric beside them shares the --judge-* flags; each kind keeps its own
    # manifest section and cache account.
    cli_round_trip(tmp_path, capsys, ["-m", "judge:fluency"])


def test_cli_offline_miss_exits_2_and_writes_nothing(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    path = write_records(tmp_path / "r.jsonl", [R1, R2])
    out = tmp_path / "out"
    code = main(["score", str(path), *CLI_METRICS, "--judge-model", MODEL, "--offline",
                 "--cache", str(tmp_path / "none.sqlite"), "--out", str(out),
                 "--no-progress"], stdout=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2
    assert not (out / "records.jsonl").exists() and not (out / "summary.json").exists()
    # 4 extractions, 2 nugget lists, 5 citation checks (r1: 3 passage sets, r2: 2)
    assert "11 of 11 judge replies are not in the cache" in err
    assert "r1 (extract_claims)" in err


def test_a_run_that_needs_the_judge_without_a_model_says_so(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", [R1])
    with pytest.raises(UsageError, match="need a judge model"):
        evaluate(path, ["claims:f1"], bootstrap=10)


# ---- 9. names ------------------------------------------------------------------------


def test_metrics_command_lists_the_claim_level_names() -> None:
    out = io.StringIO()
    assert main(["metrics"], stdout=out) == 0
    text = out.getvalue()
    assert "claim-level judge metrics" in text
    for name in [*CLAIMS, *NUGGETS, "citations:recall", "citations:precision"]:
        assert name in text, name


def test_unknown_targets_are_usage_errors_listing_the_known(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_records(tmp_path / "r.jsonl", [R1])
    base = ["score", str(path), "--judge-model", MODEL, "--out", str(tmp_path / "out")]
    assert main([*base, "-m", "claims:precison"], stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "unknown metric 'claims:precison'" in err
    assert all(name in err for name in CLAIMS)
    assert main([*base, "-m", "nuggets:vital_strct"], stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in NUGGETS)
    assert main([*base, "-m", "citations:recal"], stdout=io.StringIO()) == 2
    assert "citations:recall, citations:precision" in capsys.readouterr().err
    assert main([*base, "-m", "nuggets:all(source=answers)"], stdout=io.StringIO()) == 2
    assert "reference, contexts" in capsys.readouterr().err
    assert main([*base, "-m", "claims:f1@3"], stdout=io.StringIO()) == 2
    assert "takes no cutoff" in capsys.readouterr().err
    assert main([*base, "-m", "citations:recall(max_citations=0)"],
                stdout=io.StringIO()) == 2
    assert "at least 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
