"""The report of a run calibrated by a labels file (--human-labels): the human labels beside
the judge's values in the records table, escaped, and the calibrated mean with its interval
and the annotators' figures where the summary's calibration is shown."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from rageval.api import evaluate
from rageval.core.results import Results
from rageval.judge.llm.options import JudgeOptions
from rageval.report.html.page import build_report

CALIBRATION = Path(__file__).resolve().parents[2] / "fixtures" / "calibration"
METRIC = "judge:faithfulness"
ODD = "<b>bo</b>"  # an annotator's name is text, never markup


def _line(record_id: str, label: float | None, who: str, **extra: Any) -> str:
    return json.dumps({"id": record_id, "metric": METRIC, "label": label, "annotator": who,
                       "time": "2026-11-29T08:00:00Z", **extra}) + "\n"


def _scored(labels: Path) -> Results:
    judge = JudgeOptions(model="smollm2-135m-instruct", offline=True,
                         cache=str(CALIBRATION / "judge_cache.jsonl"))
    return evaluate(CALIBRATION / "records.jsonl", [METRIC], judge=judge,
                    human_labels=labels, bootstrap=20)


def test_the_records_table_shows_each_annotator_s_label_beside_the_judge(
        tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(_line(f"c{i:02d}", 1 + i % 5, "ana") for i in range(1, 13))
                      + "".join(_line(f"c{i:02d}", 1 + (i + 1) % 5, ODD) for i in range(1, 7)),
                      encoding="utf-8")
    results = _scored(labels)
    page = build_report([("run", results)])
    assert 'data-key="judge:faithfulness:human"' in page
    assert ODD not in page and "&lt;b&gt;bo&lt;/b&gt;" in page
    # c01: ana 2, bo 3: their mean, then each annotator's label.
    row = next(r for r in page.split("<tr>") if '<td class="id">c01</td>' in r)
    assert re.search(r'class="num human" data-v="2\.5" title="&lt;b&gt;bo&lt;/b&gt; 3, ana 2"',
                     row)
    untouched = next(r for r in page.split("<tr>") if '<td class="id">c20</td>' in r)
    assert 'title="no human label"' in untouched
    c = results.summary[METRIC].calibrated
    assert c is not None and c.mean is not None and c.ci95 is not None
    assert (f"{METRIC} calibrated by 12 human labels (PPI, 28 unlabelled): {c.mean:.4f} "
            f"[{c.ci95[0]:.4f}, {c.ci95[1]:.4f}]") in page
    assert (f"{METRIC} labels from {labels}: 12 records labelled (&lt;b&gt;bo&lt;/b&gt; 6, "
            "ana 12), uniform selection; agreement over 6 common records") in page


def test_actively_selected_labels_show_the_active_mean(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    text = ""
    for i in range(1, 31):
        pi = 0.3 + 0.02 * i
        walk = {"selection": "active", "probability": pi, "seed": 0, "position": i - 1}
        text += (_line(f"c{i:02d}", None, "ana", passed=True, **walk) if i % 3 == 0 else
                 _line(f"c{i:02d}", 1 + i % 5, "ana", **walk))
    labels.write_text(text, encoding="utf-8")
    results = _scored(labels)
    c = results.summary[METRIC].calibrated
    assert c is not None and c.method == "active" and c.mean is not None
    page = build_report([("run", results)])
    assert (f"{METRIC} calibrated by 20 human labels (active inference, 10 records passed "
            f"over): {c.mean:.4f}") in page
    assert "active selection" in page


def _labels_notes(page: str) -> list[str]:
    return re.findall(r'<p class="note labels-note">(.*?)</p>', page)


def test_a_labels_file_gone_leaves_the_labels_out_and_says_so(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(_line(f"c{i:02d}", 3, "ana") for i in range(1, 13)),
                      encoding="utf-8")
    results = _scored(labels)
    labels.unlink()
    page = build_report([("run", results)])
    assert 'class="num human"' not in page
    assert f"{METRIC} calibrated by 12 human labels" in page
    (note,) = _labels_notes(page)
    assert note == (f"the labels file {labels} named by the run&#x27;s manifest was not "
                    "found: the human labels are not shown")


def test_a_relative_labels_path_read_from_another_folder_says_where_it_looked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "project" / "labels.jsonl").write_text(
        "".join(_line(f"c{i:02d}", 3, "ana") for i in range(1, 13)), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "project")
    results = _scored(Path("labels.jsonl"))
    assert 'class="num human"' in build_report([("run", results)])
    monkeypatch.chdir(tmp_path / "elsewhere")
    page = build_report([("run", results)])
    assert 'class="num human"' not in page
    (note,) = _labels_notes(page)
    assert note.startswith("the labels file labels.jsonl named by the run&#x27;s manifest "
                           f"(a relative path, read from {tmp_path / 'elsewhere'}) was not found")


def test_a_labels_file_that_no_longer_reads_says_why(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(_line(f"c{i:02d}", 3, "ana") for i in range(1, 13)),
                      encoding="utf-8")
    results = _scored(labels)
    with labels.open("a", encoding="utf-8") as handle:
        handle.write('{"id": "c13", "metric": "<i>x</i>", "annotator": "ana"}\n')
    page = build_report([("run", results)])
    assert 'class="num human"' not in page
    (note,) = _labels_notes(page)
    assert note.startswith(f"the labels file {labels} named by the run&#x27;s manifest no "
                           "longer reads: ")
    assert f"{labels}, line 13" in note and "label" in note
    assert "<i>" not in page.split('id="records"')[1].split("</section>")[0]


def test_a_labels_file_changed_since_the_run_is_said_to_have_changed(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(_line(f"c{i:02d}", 3, "ana") for i in range(1, 13)),
                      encoding="utf-8")
    results = _scored(labels)
    about = results.manifest["human_labels"]
    if "sha256" not in about:  # a run whose manifest records the file's digest
        about["sha256"] = hashlib.sha256(labels.read_bytes()).hexdigest()
    assert _labels_notes(build_report([("run", results)])) == []
    with labels.open("a", encoding="utf-8") as handle:
        handle.write(_line("c13", 5, "bo"))
    page = build_report([("run", results)])
    assert 'class="num human"' in page  # the file as it is now, said to differ
    (note,) = _labels_notes(page)
    assert note == (f"the labels file {labels} named by the run&#x27;s manifest changed since "
                    "the run: the human labels shown are the file&#x27;s now, not those the "
                    "calibrated figures were computed from")
