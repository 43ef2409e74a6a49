"""ALCE-style citation recall and precision: reading citations out of an answer, and the
formulas turning the judge's verdicts into the two values (hand-computed examples)."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.judge.claims.citation_scores import (
    CITATION_METRICS,
    Check,
    citation_score,
    needed_checks,
    statement_entry,
)
from rageval.judge.claims.citation_text import Statement, read_citations, split_statements

IDS = ["d1", "d2", "d3", "d4"]


def entry(cites: list[str], supported: bool | None, invalid: list[str] | None = None,
          alone: dict[str, bool] | None = None,
          without: dict[str, bool] | None = None) -> dict[str, Any]:
    return {"text": "s", "cites": cites, "invalid": invalid or [], "supported": supported,
            "alone": alone, "without": without}


def scores(*statements: dict[str, Any], errors: dict[str, str] | None = None
           ) -> dict[str, tuple[float, str | None]]:
    details = {"statements": list(statements), "errors": errors or {}}
    return {metric: citation_score(details, metric) for metric in CITATION_METRICS}


# ---- splitting --------------------------------------------------------------------------------

def test_blank_answers_have_no_statements() -> None:
    assert split_statements("") == []
    assert split_statements(" \n\t ") == []
    assert read_citations("   ", IDS) == []


def test_a_marker_after_the_full_stop_stays_with_its_sentence() -> None:
    # Punkt alone would give ["Paris is in France.", "[1] It is big [2]."].
    assert split_statements("Paris is in France. [1] It is big [2].") == [
        "Paris is in France. [1]", "It is big [2]."]
    assert split_statements("Paris is in France [1]. It is big [2][3].") == [
        "Paris is in France [1].", "It is big [2][3]."]
    # A sentence of markers only (the last one here) joins the one before.
    assert split_statements("Yes! [2] No? [3]") == ["Yes! [2]", "No? [3]"]
    assert split_statements("A. [d1]\n\nB [d2]", IDS) == ["A. [d1]", "B [d2]"]


def test_a_non_citation_bracket_after_a_full_stop_opens_the_next_sentence() -> None:
    assert split_statements("One. [sic] Two.") == ["One.", "[sic] Two."]


def test_untrained_punkt_ends_a_statement_at_an_abbreviation() -> None:
    assert split_statements("Dr. Smith left [1].") == ["Dr.", "Smith left [1]."]


# ---- reading citations -------------------------------------------------------------------------

def test_markers_and_the_space_before_them_leave_the_text() -> None:
    first, second = read_citations("Paris is in France. [1] It is big [2].", IDS)
    assert first == Statement("Paris is in France.", ("d1",), ())
    assert second == Statement("It is big.", ("d2",), ())
    (only,) = read_citations("France [1] and Spain [2] are big.", IDS)
    assert only == Statement("France and Spain are big.", ("d1", "d2"), ())


@pytest.mark.parametrize(("answer", "cites"), [
    ("X [1].", ("d1",)),
    ("X [1][2].", ("d1", "d2")),
    ("X [1, 2].", ("d1", "d2")),
    ("X [2; 1].", ("d2", "d1")),
    ("X [d3].", ("d3",)),
    ("X [d3, d4].", ("d3", "d4")),
    ("X [ d3 ,2 ].", ("d3", "d2")),
    ("X [d2][1, d2][2].", ("d2", "d1")),  # de-duplicated, first appearance first
])
def test_citation_syntaxes(answer: str, cites: tuple[str, ...]) -> None:
    assert read_citations(answer, IDS) == [Statement("X.", cites, ())]


def test_numeric_ids_are_ids_before_ranks() -> None:
    # "[2]" names context "2" (rank 3), not the context ranked 2 ("7").
    assert read_citations("X [2].", ["5", "7", "2"]) == [Statement("X.", ("2",), ())]
    # "3" is no id: it is the rank of context "2".
    assert read_citations("X [3].", ["5", "7", "2"]) == [Statement("X.", ("2",), ())]


@pytest.mark.parametrize("answer", [
    "It [sic] was.", "It [citation needed] was.", "It [a, b] was.", "It [] was.",
    "It [1,] was.", "It [-1] was.", "It [1 2] was.", "It [d1 d2] was.",
])
def test_brackets_that_are_not_citations_stay_in_the_text(answer: str) -> None:
    assert read_citations(answer, IDS) == [Statement(answer, (), ())]


def test_out_of_range_ranks_and_zero_are_invalid() -> None:
    (statement,) = read_citations("X [0][5][1, 9].", IDS)
    assert statement == Statement("X.", ("d1",), ("0", "5", "9"))
    # With no contexts at all every rank is invalid.
    assert read_citations("X [1].", []) == [Statement("X.", (), ("1",))]


def test_the_cap_keeps_the_first_citations_after_deduplication() -> None:
    (capped,) = read_citations("X [1][1][2][3][4].", IDS)
    assert capped.cites == ("d1", "d2", "d3")  # ALCE would keep d1, d1, d2
    (two,) = read_citations("X [1][1][2][3][4].", IDS, max_citations=2)
    assert two.cites == ("d1", "d2")
    (everything,) = read_citations("X [1][2][3][4].", IDS, max_citations=None)
    assert everything.cites == tuple(IDS)
    # An invalid token past the cap still counts (as in ALCE, checked before truncating).
    (late,) = read_citations("X [1][2][3][9].", IDS)
    assert late == Statement("X.", ("d1", "d2", "d3"), ("9",))
    with pytest.raises(ValueError, match="max_citations"):
        read_citations("X [1].", IDS, max_citations=0)


def test_removing_an_inner_group_can_reveal_another() -> None:
    (statement,) = read_citations("X [[1]2].", IDS)
    assert statement == Statement("X.", ("d1", "d2"), ())


# ---- recall and precision, by hand -------------------------------------------------------------

def test_single_citations() -> None:
    # recall: 2 supported of 3 = 2/3; precision: 1 + 1 + 0 credited of 3 counted = 2/3.
    got = scores(entry(["d1"], True), entry(["d2"], True), entry(["d3"], False))
    assert got["recall"] == (pytest.approx(2 / 3), None)
    assert got["precision"] == (pytest.approx(2 / 3), None)


def test_one_unnecessary_citation_of_several() -> None:
    # Supported by d1+d2+d3. d1 alone entails (credit). d2 alone does not, d1+d3 still do: d2 is
    # unnecessary (no credit). d3 alone does not, d1+d2 without it do not: necessary (credit).
    # recall 1/1; precision 2 credited / 3 counted.
    got = scores(entry(["d1", "d2", "d3"], True, alone={"d1": True, "d2": False, "d3": False},
                       without={"d2": True, "d3": False}))
    assert got["recall"] == (1.0, None)
    assert got["precision"] == (pytest.approx(2 / 3), None)


def test_a_statement_supported_only_jointly_credits_both_citations() -> None:
    # Neither passage alone entails, neither is enough without the other: 2/2.
    got = scores(entry(["d1", "d2"], True, alone={"d1": False, "d2": False},
                       without={"d1": False, "d2": False}))
    assert got == {"recall": (1.0, None), "precision": (1.0, None)}


def test_an_unsupported_statement_with_several_citations() -> None:
    # Counted 2 + 1 = 3, credited 0 + 1: precision 1/3; recall 1/2. No alone/without needed.
    got = scores(entry(["d1", "d2"], False), entry(["d3"], True))
    assert got["recall"] == (0.5, None)
    assert got["precision"] == (pytest.approx(1 / 3), None)


def test_invalid_and_uncited_statements() -> None:
    # Statement 1: invalid token, unsupported and uncounted even though the stored verdict says
    # True. Statement 2: uncited, unsupported, uncounted. Statement 3: d1, supported.
    # recall 1/3; precision 1 credited / 1 counted (only statement 3's citation counts).
    got = scores(entry(["d2"], True, invalid=["9"]), entry([], None), entry(["d1"], True))
    assert got["recall"] == (pytest.approx(1 / 3), None)
    assert got["precision"] == (1.0, None)


def test_partly_unnecessary_citations_across_statements() -> None:
    # S1: d1+d2 supported, d1 alone suffices (credit), d2 alone does not and d1 does without it
    # (unnecessary): 1 of 2. S2: d3 supported: 1 of 1. S3: d4 unsupported: 0 of 1.
    # precision (1 + 1 + 0) / (2 + 1 + 1) = 2/4; recall 2/3.
    got = scores(entry(["d1", "d2"], True, alone={"d1": True, "d2": False},
                       without={"d2": True}),
                 entry(["d3"], True), entry(["d4"], False))
    assert got["precision"] == (0.5, None)
    assert got["recall"] == (pytest.approx(2 / 3), None)


# ---- unscored ---------------------------------------------------------------------------------

def test_unread_answer() -> None:
    details = {"statements": None, "errors": {"statements": "reading failed: boom"}}
    for metric in CITATION_METRICS:
        value, reason = citation_score(details, metric)
        assert math.isnan(value) and reason == "reading failed: boom"
    value, reason = citation_score({"statements": None}, "recall")
    assert math.isnan(value) and reason == "the answer was not read into statements"


def test_no_statements() -> None:
    for value, reason in scores().values():
        assert math.isnan(value) and reason is not None and "ALCE skips" in reason


def test_undecided_support() -> None:
    got = scores(entry(["d1"], True), entry(["d2"], None), errors={"supported": "judge timeout"})
    for value, reason in got.values():
        assert math.isnan(value) and reason == "judge timeout"
    value, reason = scores(entry(["d1"], True), entry(["d2"], None))["recall"]
    assert math.isnan(value)
    assert reason == "the judge did not decide whether statement 2 is supported"


def test_missing_alone_or_without_leaves_only_precision_unscored() -> None:
    no_alone = scores(entry(["d1", "d2"], True), errors={"alone": "bad reply"})
    assert no_alone["recall"] == (1.0, None)
    assert math.isnan(no_alone["precision"][0]) and no_alone["precision"][1] == "bad reply"
    part_alone = scores(entry(["d1", "d2"], True, alone={"d1": True}))
    assert part_alone["precision"][1] == (
        "the judge did not decide whether context d2 alone supports statement 1")
    no_without = scores(entry(["d1", "d2"], True, alone={"d1": False, "d2": True}))
    assert math.isnan(no_without["precision"][0])
    assert no_without["precision"][1] == (
        "the judge did not decide whether statement 1 is supported without context d1")


def test_nothing_counted_for_precision() -> None:
    # ALCE scores precision 0 here; recall is an ordinary 0/2.
    got = scores(entry([], False), entry(["d1"], False, invalid=["0"]))
    assert got["recall"] == (0.0, None)
    value, reason = got["precision"]
    assert math.isnan(value) and reason is not None and "cites no context" in reason
    assert "ALCE scores 0" in reason


def test_unknown_metric() -> None:
    with pytest.raises(ValueError, match="unknown citation metric"):
        citation_score({"statements": []}, "f1")


# ---- the judge's questions ---------------------------------------------------------------------

def test_needed_checks_go_stage_by_stage() -> None:
    statement = read_citations("X [1][2][3].", IDS)[0]
    item = statement_entry(statement)
    assert item["supported"] is None
    assert needed_checks(item) == [Check("supported", None, ("d1", "d2", "d3"))]
    item["supported"] = True
    assert needed_checks(item, "recall") == []
    assert [c.ctx_id for c in needed_checks(item)] == ["d1", "d2", "d3"]
    item["alone"] = {"d1": True, "d2": False, "d3": False}
    assert needed_checks(item) == [Check("without", "d2", ("d1", "d3")),
                                   Check("without", "d3", ("d1", "d2"))]
    item["without"] = {"d2": True, "d3": False}
    assert needed_checks(item) == []
    assert citation_score({"statements": [item]}, "precision") == (pytest.approx(2 / 3), None)


def test_unjudgeable_statements_start_unsupported() -> None:
    for answer in ("X.", "X [9].", "X [1][9]."):
        item = statement_entry(read_citations(answer, IDS)[0])
        assert item["supported"] is False and needed_checks(item) == []


# ---- properties -------------------------------------------------------------------------------

MARKERS = ["[1]", "[2]", "[0]", "[7]", "[1, 2]", "[d1]", "[d2; 3]", "[sic]", "[", "]", ". ",
           "? ", "\n", "Dr. ", "[[1]", "x", " "]
TEXT = st.lists(st.one_of(st.sampled_from(MARKERS), st.text(max_size=8)), max_size=12).map("".join)
CONTEXT_IDS = st.lists(st.sampled_from(["d1", "d2", "3", "1", "x y"]), max_size=4, unique=True)
_GROUP = re.compile(r"\[([^\[\]]*)\]")


def recognised(inside: str, ids: list[str]) -> bool:
    tokens = [t.strip() for t in re.split(r"[,;]", inside)]
    return all(t and (t in ids or re.fullmatch(r"[0-9]+", t)) for t in tokens)


@settings(max_examples=150, deadline=None)
@given(answer=TEXT, ids=CONTEXT_IDS, cap=st.integers(1, 4))
def test_read_citations_properties(answer: str, ids: list[str], cap: int) -> None:
    for statement in read_citations(answer, ids, max_citations=cap):
        assert set(statement.cites) <= set(ids)
        assert len(statement.cites) <= cap
        assert len(set(statement.cites)) == len(statement.cites)
        assert statement.text == statement.text.strip()
        assert not any(recognised(m.group(1), ids) for m in _GROUP.finditer(statement.text))


VERDICT = st.sampled_from([True, False, None])
CITES = st.lists(st.sampled_from(IDS), max_size=3, unique=True)
ENTRY = st.builds(
    entry, cites=CITES, supported=VERDICT,
    invalid=st.one_of(st.none(), st.just(["0"])),
    alone=st.one_of(st.none(), st.dictionaries(st.sampled_from(IDS), st.booleans())),
    without=st.one_of(st.none(), st.dictionaries(st.sampled_from(IDS), st.booleans())),
)


@settings(max_examples=200, deadline=None)
@given(statements=st.one_of(st.none(), st.lists(ENTRY, max_size=5)))
def test_citation_score_is_a_fraction_or_nan_with_a_reason(statements: Any) -> None:
    for metric in CITATION_METRICS:
        value, reason = citation_score({"statements": statements, "errors": {}}, metric)
        if math.isnan(value):
            assert isinstance(reason, str) and reason
        else:
            assert 0.0 <= value <= 1.0 and reason is None
