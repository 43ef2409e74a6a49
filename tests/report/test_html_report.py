"""The HTML report: self-contained, escaped, complete; and it loads cleanly in headless Chromium."""

from __future__ import annotations

import base64
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import rageval
from rageval.core.errors import MissingDependencyError, UsageError
from rageval.core.records import Record
from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.report.html.page import build_report, load_run_records, write_report

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"
METRICS = ["ndcg@3", "bleu", "rouge1"]
JUDGE = "judge:faithfulness"
HOSTILE = "<script>alert(1)</script>"
HOSTILE_ATTR = '"><img src=x onerror=alert(2)>'


# --------------------------------------------------------------------------------------------
# Fixtures: real runs from the demo data, plus a hand-built judge metric
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo() -> Results:
    return rageval.evaluate(str(DEMO), METRICS)


def with_judge(results: Results, shift: int) -> Results:
    """The run plus judge-like scores (1-5, one unparseable reply) with reasoning."""
    records = []
    for index, result in enumerate(results.records):
        scores, errors, details = dict(result.scores), dict(result.errors), dict(result.details)
        if index == 2:
            scores[JUDGE] = math.nan
            errors[JUDGE] = "unparseable reply: no JSON object"
        else:
            scores[JUDGE] = float((index + shift) % 5 + 1)
            details[JUDGE] = {"reasoning": f"Supported by the context of {result.id}. {HOSTILE}",
                              "cached": True}
        scores["rouge1"] = scores["rouge1"] * (1 + shift / 10)
        records.append(RecordResult(result.id, scores, errors, details))
    summary = dict(results.summary)
    summary[JUDGE] = MetricSummary(
        value=3.3, n=7, unscored=1, ci95=(2.6, 4.0),
        signature="metric:judge:faithfulness|model:gpt-4o-mini|prompt:0a1b2c|rageval:0.1.0",
        reasons={"unparseable reply": 1}, short_signature="m:judge:faithfulness|jm:gpt-4o-mini")
    manifest = dict(results.manifest)
    manifest["metrics"] = [*manifest["metrics"], JUDGE]
    return Results(records, summary, manifest)


def comparison_rows(baseline: str, system: str) -> list[dict[str, Any]]:
    rows = []
    for metric, delta, ci, p in [("ndcg@3", 0.0, [-0.05, 0.05], 1.0),
                                 ("bleu", 3.2, [1.1, 5.4], 0.004),
                                 ("rouge1", 0.12, [0.05, 0.2], 0.01),
                                 (JUDGE, -0.3, None, None)]:
        rows.append({"metric": metric, "baseline": baseline, "system": system,
                     "baseline_value": 1.0, "system_value": 1.0 + delta, "delta": delta,
                     "ci95": ci, "p_value": p, "p_adjusted": None if p is None else min(1, 2 * p),
                     "wins": 4, "ties": 1, "losses": 3, "n": 8, "headline": True,
                     "signature_mismatch": metric == "bleu"})
    rows.append({"metric": "rouge1.precision", "baseline": baseline, "system": system,
                 "baseline_value": 0.5, "system_value": 0.6, "delta": 0.1, "ci95": [0.0, 0.2],
                 "p_value": 0.04, "p_adjusted": 0.08, "wins": 5, "ties": 0, "losses": 3, "n": 8,
                 "headline": False, "signature_mismatch": False})
    return rows


@pytest.fixture(scope="module")
def two_runs(demo: Results) -> tuple[str, list[tuple[str, Results]], list[Record]]:
    records = load_run_records(demo)
    assert records is not None
    runs = [("runs/a", with_judge(demo, 0)), ("runs/b", with_judge(demo, 2))]
    page = build_report(runs, comparison_rows("runs/a", "runs/b"),
                        records_by_run={"runs/a": records, "runs/b": records})
    return page, runs, records


def figures(page: str) -> list[str]:
    return re.findall(r'<figure class="plot[^"]*"[^>]*data-metric="([^"]*)"', page)


# --------------------------------------------------------------------------------------------
# Content
# --------------------------------------------------------------------------------------------


def test_single_run_has_summary_plots_records_and_manifest(demo: Results) -> None:
    page = build_report([("out/run", demo)], records_by_run={"out/run": load_run_records(demo)})
    for element_id in ("summary-0", "records-table", "manifest-0", "records-filter"):
        assert f'id="{element_id}"' in page
    assert 'id="comparison' not in page and 'id="plot-forest"' not in page
    assert figures(page) == METRICS  # one plot per headline metric, components left out
    assert page.count("<svg") == len(METRICS)
    # Every summary number is printed with its signature (long form on hover).
    for item in demo.summary.values():
        assert f'title="{item.signature}"' in page
    # Queries and answers come from the records file the manifest names.
    assert "What are the company&#x27;s main revenue sources?" in page
    assert "&quot;source&quot;: &quot;" in page and "rageval report: out/run" in page


def test_two_runs_have_comparison_table_and_forest_plot(two_runs) -> None:
    page, runs, _ = two_runs
    assert 'id="comparison-table"' in page and 'id="plot-forest"' in page
    assert figures(page) == [*METRICS, JUDGE]
    assert page.count("<svg") == len(METRICS) + 2  # + the judge's bar plot + the forest plot
    # Per-run score columns in the records table, keyed run:metric.
    for name, _ in runs:
        assert f'data-key="{name}:ndcg@3"' in page
    # Significance marks, the direction of a CI that excludes zero, the mismatch flag.
    assert '<span class="stars">**</span>' in page  # bleu: p_adj 0.008
    assert 'class="num up"' in page  # rouge1: CI above zero
    assert "⚠ signature" in page
    assert 'class="component"' in page  # the non-headline row, hidden until asked for
    assert 'id="manifest-1"' in page


def test_judge_reasoning_and_unscored_reasons_are_shown(two_runs) -> None:
    page, _, _ = two_runs
    assert "judge reasoning" in page and "Supported by the context of q1." in page
    assert "unparseable reply: no JSON object" in page
    # An unscored value is explicit (a dash with its reason), never a zero.
    assert 'data-v="" title="unparseable reply: no JSON object">—</td>' in page
    # The judge's scores are drawn on its integer scale, as counts.
    assert "counts of judge:faithfulness scores" in page


def test_unscored_summary_values_render_as_dashes() -> None:
    summary = {"mrr": MetricSummary(math.nan, 0, 2, None, "metric:mrr", {"no judgments": 2})}
    records = [RecordResult("r1", {"mrr": math.nan}, {"mrr": "no judgments"}, {}),
               RecordResult("r2", {"mrr": math.nan}, {"mrr": "no judgments"}, {})]
    page = build_report([("x", Results(records, summary, {"metrics": ["mrr"]}))])
    assert "no scored records" not in page  # drawn as paths: the text is not in the page
    assert page.count("<svg") == 1
    assert '<td class="num null" data-v="">—</td>' in page
    assert "2 unscored: no judgments" in page
    assert "The records files could not be found" in page


def test_without_records_files_the_table_shows_ids_scores_and_reasoning(demo: Results) -> None:
    page = build_report([("a", with_judge(demo, 0))])
    assert 'data-key="query"' not in page and 'data-key="answer"' not in page
    assert 'data-key="reasoning"' in page and '<td class="id">q1</td>' in page


def test_different_answers_get_one_column_per_run(demo: Results) -> None:
    records = load_run_records(demo)
    assert records is not None
    changed = [Record(r.id, r.query, r.contexts, f"Other: {r.answer}", r.references)
               for r in records]
    page = build_report([("a", demo), ("b", demo)],
                        records_by_run={"a": records, "b": changed})
    assert 'data-key="answer:a"' in page and 'data-key="answer:b"' in page


# --------------------------------------------------------------------------------------------
# Safety and self-containment
# --------------------------------------------------------------------------------------------


def test_hostile_text_is_escaped_everywhere() -> None:
    name = f"run{HOSTILE_ATTR}"
    metric = f"m{HOSTILE}"
    summary = {metric: MetricSummary(0.5, 1, 0, (0.1, 0.9), f"sig{HOSTILE_ATTR}",
                                     short_signature=HOSTILE)}
    results = Results(
        [RecordResult(f"id{HOSTILE}", {metric: 0.5}, {},
                      {metric: {"reasoning": HOSTILE, "cached": False}})],
        summary, {"metrics": [metric], "note": HOSTILE, "records": {"source": HOSTILE}})
    record = Record(f"id{HOSTILE}", query=HOSTILE_ATTR, answer=HOSTILE, references=(HOSTILE,))
    rows = [{"metric": metric, "baseline": name, "system": HOSTILE, "baseline_value": 0.5,
             "system_value": 0.6, "delta": 0.1, "ci95": [0.0, 0.2], "p_value": 0.5,
             "p_adjusted": 0.5, "wins": 1, "ties": 0, "losses": 0, "n": 1,
             "signature_mismatch": HOSTILE}]
    page = build_report([(name, results)], rows, records_by_run={name: [record]},
                        title=HOSTILE)
    assert HOSTILE not in page
    assert "<img" not in page
    assert page.count("<script") == 1  # ours, at the end of the body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in page


def test_page_references_nothing_outside_itself(two_runs) -> None:
    page, _, _ = two_runs
    lowered = page.lower()
    for forbidden in ("<link", "@import", "<iframe", "<object", "<embed", "<img", "<base"):
        assert forbidden not in lowered
    assert not re.search(r"<script[^>]*\ssrc\s*=", lowered)
    assert not re.search(r"url\(\s*['\"]?(?!#)", lowered)  # only in-page SVG references
    for target in re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', page):
        assert target.startswith("#"), target
    # The only absolute URLs are SVG namespace names, which are never fetched.
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


def test_content_security_policy_allows_exactly_our_script(two_runs) -> None:
    page, _, _ = two_runs
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    script = re.search(r"<script>(.*?)</script>", page, flags=re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script[1].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy[1]
    assert "default-src 'none'" in policy[1]


def test_ids_are_unique_across_inline_svgs(two_runs) -> None:
    page, _, _ = two_runs
    ids = Counter(re.findall(r'\bid="([^"]+)"', page))
    assert ids and not [name for name, count in ids.items() if count > 1]
    # Every in-page reference points to an id that exists.
    for target in re.findall(r'(?:href="#|url\(#)([^")]+)', page):
        assert target in ids, target
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page and "<metadata>" not in page


def test_output_is_deterministic(demo: Results) -> None:
    runs = [("a", with_judge(demo, 0)), ("b", with_judge(demo, 1))]
    rows = comparison_rows("a", "b")
    assert build_report(runs, rows) == build_report(runs, rows)


# --------------------------------------------------------------------------------------------
# matplotlib handling, inputs, files
# --------------------------------------------------------------------------------------------


def test_missing_matplotlib_names_the_extra(demo: Results,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(MissingDependencyError, match=r"rageval\[report\]"):
        build_report([("a", demo)])


def test_matplotlib_global_state_is_left_alone(demo: Results) -> None:
    import matplotlib

    had_pyplot = "matplotlib.pyplot" in sys.modules
    before = dict(matplotlib.rcParams)
    build_report([("a", demo)])
    assert dict(matplotlib.rcParams) == before
    if not had_pyplot:
        assert "matplotlib.pyplot" not in sys.modules


def test_bad_run_lists_are_usage_errors(demo: Results) -> None:
    with pytest.raises(UsageError, match="at least one run"):
        build_report([])
    with pytest.raises(UsageError, match="distinct"):
        build_report([("a", demo), ("a", demo)])
    with pytest.raises(UsageError, match="unknown runs"):
        build_report([("a", demo)], records_by_run={"b": []})


def test_load_run_records(demo: Results, tmp_path: Path) -> None:
    records = load_run_records(demo)
    assert records is not None and [r.id for r in records][:2] == ["q1", "q2"]
    for source in ("<memory>", str(tmp_path / "gone.jsonl"), None):
        manifest = {"records": {"source": source, "count": 1}}
        assert load_run_records(Results([], {}, manifest)) is None
    assert load_run_records(Results([], {}, {})) is None


def test_write_report_replaces_the_file_atomically(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "report.html"
    write_report(target, "<!DOCTYPE html><p>one</p>")
    path = write_report(target, "<!DOCTYPE html><p>two ✓</p>")
    assert path == target
    assert target.read_text(encoding="utf-8") == "<!DOCTYPE html><p>two ✓</p>"
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's private 0600


# --------------------------------------------------------------------------------------------
# Headless Chromium
# --------------------------------------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    message = "headless test needs Chromium (Debian: apt-get install chromium)"
    if os.environ.get("CI") == "true":  # CI installs it: a missing browser is a failure there
        pytest.fail(message)
    pytest.skip(message)


def _load(browser: str, url: str, profile: Path) -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, and every console message the page produced."""
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-default-apps", "--disable-sync", "--no-first-run",
               "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",
               "--proxy-server=127.0.0.1:9", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", "--dump-dom", url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


class _RecordRows(HTMLParser):
    """The body rows of the records table: hidden or not, and each cell's data-v and text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []
        self.ready = False
        self._in_table = self._in_body = False
        self._cell: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "body":
            self.ready = found.get("data-ready") == "1"
        elif tag == "table":
            self._in_table = found.get("id") == "records-table"
        elif self._in_table and tag == "tbody":
            self._in_body = True
        elif self._in_body and tag == "tr":
            self.rows.append({"hidden": "hidden" in found, "cells": []})
        elif self._in_body and tag == "td":
            self._cell = {"v": found.get("data-v"), "text": ""}
            self.rows[-1]["cells"].append(self._cell)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = self._in_body = False
        elif tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data


@pytest.mark.browser
def test_report_loads_cleanly_in_headless_chromium(two_runs, tmp_path: Path) -> None:
    browser = _chromium()
    page, _, _ = two_runs
    report = write_report(tmp_path / "report.html", page)

    # The console capture works at all: a page that logs an error is caught.
    canary = tmp_path / "canary.html"
    canary.write_text("<!DOCTYPE html><script>console.error('canary')</script>")
    _, console = _load(browser, canary.as_uri(), tmp_path / "profile")
    assert any("canary" in line for line in console), "console messages are not captured"

    dom, console = _load(browser, report.as_uri(), tmp_path / "profile")
    assert console == []  # no errors, no CSP violations, no blocked loads
    rows = _RecordRows()
    rows.feed(dom)
    assert rows.ready, "the report's script did not finish"
    for element_id in ("summary-0", "summary-1", "comparison-table", "records-table",
                       "plot-forest", "manifest-0"):
        assert f'id="{element_id}"' in dom
    assert dom.count("<svg") == len(METRICS) + 2
    assert len(rows.rows) == 8 and not any(row["hidden"] for row in rows.rows)

    # Sorting and filtering, pre-applied from the URL fragment as a reader would share them.
    column = next(i for i, cell in enumerate(re.findall(r"<th[^>]*>", page.split(
        'id="records-table"')[1].split("</thead>")[0])) if 'data-key="runs/a:ndcg@3"' in cell)
    url = report.as_uri() + "#sort=" + quote("runs/a:ndcg@3:desc", safe="") + "&q=revenue"
    dom, console = _load(browser, url, tmp_path / "profile")
    assert console == []
    rows = _RecordRows()
    rows.feed(dom)
    visible = [row for row in rows.rows if not row["hidden"]]
    hidden = [row for row in rows.rows if row["hidden"]]
    assert visible and hidden
    text = ["".join(cell["text"] for cell in row["cells"]).lower() for row in rows.rows]
    assert all(("revenue" in t) != row["hidden"] for t, row in zip(text, rows.rows, strict=True))
    keys = [row["cells"][column]["v"] for row in rows.rows]
    numbers = [float(v) for v in keys if v]
    assert numbers == sorted(numbers, reverse=True)
    assert all(not v for v in keys[len(numbers):])  # unscored last
    assert 'aria-sort="descending"' in dom
