"""Every channel tells the same story: the terminal, the closing line and the HTML report count
the same things with the same nouns, show each metric's scale, and `rageval compare` fits 80
columns with nothing cut."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from rageval.cli import main
from rageval.cli.progress import final_line
from rageval.compare.runs.compare import compare_runs
from rageval.compare.runs.output import _fmt, render_comparison
from rageval.core.outputs.significance import p_value_text
from rageval.core.results import Results
from rageval.core.results.counts import RunCounts
from rageval.core.scale import scale_text
from rageval.report.html.data import prepare_runs, scored_values
from rageval.report.html.page import build_report, load_run_records
from rageval.report.tables import unscored_lines

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"


@pytest.fixture(scope="module")
def conversations(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The conversation demo, run once: its directory and what the terminal printed."""
    out = tmp_path_factory.mktemp("story") / "conversations"
    printed = io.StringIO()
    argv = ["run", str(DEMO / "conversations.toml"), "--out", str(out), "--no-progress"]
    assert main(argv, stdout=printed) == 0
    return out, printed.getvalue()


def test_terminal_closing_line_and_report_count_the_same_things(
        conversations: tuple[Path, str]) -> None:
    out, printed = conversations
    results = Results.load(out)
    size = "3 conversations of 7 turns and 1 record on its own"
    assert RunCounts.of(results).text() == size
    assert size in " ".join(printed.split())  # the summary's title, folded at the width
    assert final_line(results).startswith(f"{size} · ")  # not "8 records"
    page = (out / "report.html").read_text(encoding="utf-8")
    header = re.search(r'<p class="runs">.*?</p>', page, re.S)
    assert header is not None and f"({size})" in header[0]
    assert not re.search(r"\(\d+ records\)", header[0])  # the conversations' own lines


def test_report_reasons_say_what_the_terminal_says(conversations: tuple[Path, str]) -> None:
    out, printed = conversations
    results = Results.load(out)
    lines = unscored_lines(results)
    assert lines and all(" unscored turns: " in line for line in lines)
    page = (out / "report.html").read_text(encoding="utf-8")
    reasons = re.search(r'<ul class="reasons">(.*?)</ul>', page, re.S)
    assert reasons is not None
    shown = [re.sub(r"<[^>]+>", "", item) for item in re.findall(r"<li>(.*?)</li>", reasons[1])]
    assert shown == lines
    assert all(line in printed for line in lines)


def test_plots_count_what_the_summary_counts(conversations: tuple[Path, str]) -> None:
    out, _ = conversations
    results = Results.load(out)
    [run] = prepare_runs([("run", results)], {})
    for name, item in results.summary.items():
        if item.in_table:
            assert len(scored_values(run, name)) == item.n, name


def test_conversation_rows_of_the_records_table_hold_values(
        conversations: tuple[Path, str]) -> None:
    out, _ = conversations
    page = (out / "report.html").read_text(encoding="utf-8")
    row = re.search(r'<tr><td class="id">conv-revenue</td>(.*?)</tr>', page, re.S)
    assert row is not None
    assert "the conversation as a whole (3 turns)" in row[1]
    means = re.findall(r'class="num score mean" data-v="([0-9.]+)" '
                       r'title="the mean of its 3 scored turns"', row[1])
    turns = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    ndcg = [t["scores"]["ndcg@3"] for t in turns if t.get("conversation") == "conv-revenue"
            and t.get("turn") is not None]
    assert float(means[0]) == pytest.approx(sum(ndcg) / len(ndcg))
    css = re.search(r"<style>(.*?)</style>", page, re.S)
    assert css is not None and "overflow-wrap: anywhere" in css[1]  # long texts wrap


# --- scales --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("scales") / "run"
    printed = io.StringIO()
    argv = ["score", str(DEMO / "records.jsonl"), "-m", "judge:faithfulness",
            "-m", "judge:context_relevance", "-m", "bleu", "-m", "ndcg@3", "-m", "dcg@3",
            "--judge-model", "smollm2-135m-instruct", "--cache",
            str(DEMO / "judge_cache.jsonl"), "--offline", "--bootstrap", "20", "--out",
            str(out), "--no-progress", "--report"]
    assert main(argv, stdout=printed) == 0
    return out, printed.getvalue()


SCALES = {"judge:faithfulness": [1.0, 5.0], "judge:context_relevance": [0.0, 3.0],
          "bleu": [0.0, 100.0], "bleu.bp": [0.0, 1.0], "ndcg@3": [0.0, 1.0],
          "dcg@3": [None, None]}


def test_each_value_carries_its_scale(judged: tuple[Path, str]) -> None:
    out, printed = judged
    metrics = json.loads((out / "summary.json").read_text())["metrics"]
    assert {name: metrics[name]["scale"] for name in SCALES} == SCALES
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip()
            for line in printed.splitlines() if line.count("│") > 5}
    assert rows["judge:faithfulness"] == "1–5"
    assert rows["judge:context_relevance"] == "0–3"
    assert rows["bleu (corpus)"] == "0–100"
    assert rows["ndcg@3"] == "0–1" and rows["dcg@3"] == "unbounded"
    summary = Results.load(out).summary
    assert scale_text(summary["judge:context_relevance"].scale) == "0–3"


def test_report_shows_scales_and_plots_on_them(judged: tuple[Path, str]) -> None:
    out, _ = judged
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '<td class="scale">0–3</td>' in page and '<td class="scale">1–5</td>' in page
    caption = re.search(r'data-metric="judge:context_relevance"><figcaption>(.*?)</figcaption>',
                        page, re.S)
    assert caption is not None and "scale 0–3" in caption[1]
    results = Results.load(out)
    html = build_report([("run", results)], records_by_run={"run": load_run_records(results)})
    assert "scale 0–100" in html


# --- rageval compare at 80 columns ---------------------------------------------------------

@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("compare")
    runs = []
    for name, records in (("a", DEMO / "records.jsonl"),
                          ("b", ROOT / "fixtures" / "docs" / "records_b.jsonl")):
        argv = ["score", str(records), "-m", "rouge2", "-m", "bleu", "-m", "mrr",
                "--bootstrap", "20", "--out", str(root / name), "--no-progress"]
        if name == "a":
            argv += ["-m", "ndcg@3", "-m", "rouge1"]  # rouge1 has components
        assert main(argv, stdout=io.StringIO()) == 0
        runs.append(str(root / name))
    return runs


@pytest.mark.parametrize("width", [80, 100])
def test_compare_fits_narrow_terminals_whole(two_runs: list[str], width: int) -> None:
    comparison = compare_runs(two_runs, seed=0, resamples=200, permutations=200)
    buffer = io.StringIO()
    render_comparison(comparison, Console(file=buffer, width=width, no_color=True))
    text = buffer.getvalue()
    assert "…" not in text
    assert all(len(line) <= width for line in text.splitlines())
    for row in comparison.rows:
        if not row["headline"]:
            continue
        low, high = row["ci95"]
        for figure in (_fmt(row["baseline_value"]), _fmt(row["system_value"]),
                       _fmt(row["delta"], signed=True), p_value_text(row["p_adjusted"]),
                       f"[{_fmt(low, signed=True)}, {_fmt(high, signed=True)}]"):
            assert figure in text, (row["metric"], figure)
    # What is the same for every row is said once, not in a column.
    assert "signatures: the same in both runs" in text and "same  " not in text


def test_compare_lists_what_was_asked_not_components(two_runs: list[str]) -> None:
    first, second = two_runs
    comparison = compare_runs([second, first], seed=0, resamples=50, permutations=50)
    buffer = io.StringIO()
    render_comparison(comparison, Console(file=buffer, width=200, no_color=True))
    [line] = [line for line in buffer.getvalue().splitlines() if "not compared" in line]
    listed = line.split("not compared: ")[1].split(", ")
    assert sorted(listed) == ["ndcg@3", "rouge1"]  # not rouge1.precision, ...


def test_bar_plots_count_conversations_in_a_run_of_conversations(
        conversations: tuple[Path, str]) -> None:
    from matplotlib.figure import Figure

    from rageval.report.html.plots import draw_bars

    out, _ = conversations
    results = Results.load(out)
    [run] = prepare_runs([("run", results)], {})
    figure = Figure()
    metric = "judge:faithfulness"
    draw_bars(figure, metric, [(run, scored_values(run, metric))],
              results.summary[metric].scale)
    assert figure.axes[0].get_ylabel() == "conversations"  # what n counts, not "records"


def test_plot_labels_show_control_characters_escaped(judged: tuple[Path, str]) -> None:
    """A run named with an escape (a path holding one) is drawn with it shown as ``\\x1b``:
    matplotlib has no glyph for it and would warn on stderr with the raw character."""
    import warnings

    out, _ = judged
    results = Results.load(out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_report([("run\x1b[2J\nx", results)])
    assert [str(w.message) for w in caught if "Glyph" in str(w.message)] == []
