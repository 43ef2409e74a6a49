"""The records table's claims column: claim-level details read back from a written run, drawn
escaped and searchable, and no column at all when no run has such details."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.report.html.page import build_report

pytest.importorskip("matplotlib")

HOSTILE = "<script>alert(1)</script>"
METRIC = "claims:precision"


def claim_details() -> dict[str, Any]:
    """Details of all three kinds, with null verdicts, errors and hostile text."""
    claims = {
        "contexts": ["d1", "d2", "d3"],
        "answer_claims": [
            {"text": "Revenue rose & margins held",
             "reference": "entailment", "contexts": {"d3": "entailment", "d1": "entailment",
                                                     "d2": "neutral"}},
            {"text": f"The CEO resigned {HOSTILE}", "reference": "contradiction",
             "contexts": {"d1": "neutral", "d2": "contradiction", "d3": "neutral"}},
            {"text": "Guidance is unchanged", "reference": None, "contexts": None},
        ],
        "reference_claims": [
            {"text": "Revenue rose", "answer": "entailment", "contexts": {"d2": "entailment"}},
            {"text": "Costs fell", "answer": "neutral", "contexts": None},
        ],
        "errors": {"answer_claims.contexts": "judge reply unparseable for d1 & d2"},
        "sources": {"answer_claims": "judge", "reference_claims": "record"},
    }
    nuggets = {
        "source": "reference",
        "nuggets": [
            {"text": "revenue grew 5%", "importance": "vital", "assignment": "support"},
            {"text": "margins held", "importance": "okay", "assignment": "partial_support"},
            {"text": "new CFO", "importance": "vital", "assignment": "not_support"},
            {"text": "dividend", "importance": None, "assignment": None},
        ],
        "errors": {"importance": "no reply"},
    }
    citations = {
        "statements": [
            {"text": "Revenue rose.", "cites": ["d1", "d3"], "invalid": ["7"], "supported": True,
             "alone": {"d1": True, "d3": False}, "without": {"d1": False, "d3": True}},
            {"text": "Margins held.", "cites": [], "invalid": [], "supported": None,
             "alone": None, "without": None},
        ],
        "errors": {},
    }
    return {"claims": claims, "nuggets(source=reference)": nuggets, "citations": citations}


def write_run(directory: Path, details: dict[str, Any] | None) -> Results:
    """A two-record run written to disk and read back, so the details are the plain JSON of
    ``records.jsonl``; the first record holds ``details`` when given."""
    records = [RecordResult("q1", {METRIC: 0.5}, {}, details or {}),
               RecordResult("q2", {METRIC: 1.0}, {}, {})]
    summary = {METRIC: MetricSummary(0.75, 2, 0, (0.5, 1.0), f"metric:{METRIC}")}
    Results(records, summary, {"metrics": [METRIC]}).write(directory)
    return Results.load(directory)


class _Cells(HTMLParser):
    """The text of each claims cell (what the table's filter matches), by record id."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: dict[str, str] = {}
        self._id: str | None = None
        self._depth = 0  # nesting inside the current claims cell, 0 outside
        self._in_id = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "td" and found.get("class") == "id":
            self._in_id = True
        elif tag == "td" and found.get("class") == "claims":
            self._depth = 1
            self.texts[self._id or ""] = ""
        elif self._depth:
            self._depth += tag not in ("br",)

    def handle_endtag(self, tag: str) -> None:
        if self._depth:
            self._depth -= 1
        self._in_id = False

    def handle_data(self, data: str) -> None:
        if self._in_id:
            self._id = data
        elif self._depth:
            self.texts[self._id or ""] += data


def cell_texts(page: str) -> dict[str, str]:
    parser = _Cells()
    parser.feed(page)
    return parser.texts


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    run = write_run(tmp_path_factory.mktemp("runs") / "a", claim_details())
    return build_report([("runs/a", run)])


def test_claims_column_shows_every_kind(page: str) -> None:
    assert 'data-key="claims"' in page
    text = cell_texts(page)["q1"]
    # Answer claims: verdict against the reference, contexts named in rank order.
    assert "✓ entailed Revenue rose & margins held — supported by d1, d3" in text
    assert "✗ contradicted The CEO resigned" in text and "— no context" in text
    assert "? not checked Guidance is unchanged — contexts not checked" in text
    assert "answer claims · 3: 1 entailed, 1 contradicted, 1 not checked (from the judge)" in text
    # Reference claims: whether the answer entails them, and where they were found.
    assert "✓ entailed Revenue rose — supported by d2" in text
    assert "○ neutral Costs fell — contexts not checked" in text
    # Nuggets: assignment and importance, the key's parameters named.
    assert "✓ support vital revenue grew 5%" in text
    assert "◐ partial okay margins held" in text
    assert "✗ no support vital new CFO" in text
    assert "? not assigned unrated dividend" in text
    assert "(nuggets(source=reference); from the reference)" in text
    # Citations: cited contexts, the unnecessary one, invalid ones, supported or not.
    assert "✓ supported Revenue rose. — cites d1, d3 (unnecessary) invalid: 7" in text
    assert "? not checked Margins held. — no citation" in text
    # Errors on a muted line.
    assert "errors: answer_claims.contexts: judge reply unparseable for d1 & d2" in text
    assert "errors: importance: no reply" in text


def test_claims_markup_is_escaped_clipped_and_styled(page: str) -> None:
    cell = re.search(r'<td class="claims">(.*?)</td>', page, flags=re.S)
    assert cell is not None
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in cell[1]
    assert "Revenue rose &amp; margins held" in cell[1] and " & " not in cell[1]
    assert cell[1].startswith('<div class="clip"')
    assert '<span class="cite-unneeded"' in cell[1]
    assert '<span class="mark v-yes"' in cell[1] and '<span class="mark v-no"' in cell[1]
    assert '<span class="mark v-neutral"' in cell[1] and '<span class="mark v-none"' in cell[1]
    assert '<div class="claims-errors">' in cell[1]
    for css in (".v-yes", ".v-no", ".v-neutral", ".cite-unneeded", ".claims-errors"):
        assert css in page
    # A record without details gets an empty, sortable-last cell; one script on the page.
    assert cell_texts(page).keys() == {"q1"}
    assert page.count("<script") == 1


def test_no_claims_column_without_claim_details(tmp_path: Path) -> None:
    other = {"judge:faithfulness": {"reasoning": "fine"}, "claimsish": {"text": "not ours"}}
    run = write_run(tmp_path / "plain", other)
    page = build_report([("plain", run)])
    assert 'data-key="claims"' not in page and 'class="claims' not in page


def test_several_runs_label_their_parts(tmp_path: Path) -> None:
    with_details = write_run(tmp_path / "a", claim_details())
    without = write_run(tmp_path / "b", None)
    page = build_report([("a", with_details), ("b", without)])
    assert 'data-key="claims"' in page
    cell = re.search(r'<td class="claims">(.*?)</td>', page, flags=re.S)
    assert cell is not None
    # Only the run that has details gets a part, labelled with its name.
    assert cell[1].count('<div class="claims-run">') == 1
    assert cell_texts(page)["q1"].startswith("a")


def test_malformed_details_do_not_break_the_page(tmp_path: Path) -> None:
    details = {"claims": {"answer_claims": None, "reference_claims": "oops",
                          "errors": {"answer_claims": "extraction failed"}},
               "nuggets": {"nuggets": [1, {"text": None, "assignment": "maybe"}]},
               "citations(k=2)": {"statements": None}}
    page = build_report([("x", write_run(tmp_path / "x", details))])
    text = cell_texts(page)["q1"]
    assert "errors: answer_claims: extraction failed" in text
    assert "? maybe unrated (no text)" in text
    assert "citations(k=2): nothing recorded" in text
