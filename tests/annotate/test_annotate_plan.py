"""``rageval annotate --plan WIDTH``: the labels still needed, uniform and active, as the
planner of rageval.stats.label_plan computes them from the file's standing labels."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from annotate_helpers import FAITH, write_judged_run

from rageval.cli import main
from rageval.core.labels import LabelLine, LabelsFile
from rageval.stats.active import selection_probabilities
from rageval.stats.label_plan import plan_labels

TIME = "2026-11-29T08:00:00Z"


def judged_pool(tmp_path: Path, records: int = 120) -> tuple[Path, dict[str, float]]:
    rng = np.random.default_rng(3)
    scores = {f"q{i:03d}": float(rng.integers(1, 6)) for i in range(records)}
    details = {rid: {"samples": [v, min(5.0, v + 1.0)] if i % 4 == 0 else [v, v]}
               for i, (rid, v) in enumerate(scores.items())}
    return write_judged_run(tmp_path, scores, details=details), scores


def plan(run: Path, labels: Path, width: str, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["annotate", str(run), "--metric", FAITH, "--labels", str(labels),
                 "--plan", width, *extra], stdout=out)
    return code, out.getvalue()


def test_the_plan_states_the_planners_figures_for_the_labels_so_far(tmp_path: Path) -> None:
    run, scores = judged_pool(tmp_path)
    labels = tmp_path / "labels.jsonl"
    written = LabelsFile(labels)
    ids = list(scores)[:30]
    for i, rid in enumerate(ids):  # two annotators, averaged per record
        written.append(LabelLine(rid, FAITH, scores[rid] - (i % 3 == 0), "ana", TIME))
        written.append(LabelLine(rid, FAITH, scores[rid], "bo", TIME))
    code, text = plan(run, labels, "0.27")
    assert code == 0
    judged = np.array(list(scores.values()))
    human = np.full(len(judged), np.nan)
    human[:30] = [scores[rid] - (i % 3 == 0) / 2 for i, rid in enumerate(ids)]
    spread = [np.std([v, min(5.0, v + 1.0)], ddof=1) if i % 4 == 0 else 0.0
              for i, v in enumerate(judged)]
    expected = plan_labels(judged, human, 0.27, uncertainty=spread)
    assert expected.refused is None and expected.uniform_more is not None
    assert f"{FAITH}: 30 of 120 records labelled so far (uniform)" in text
    assert (f"uniform: {expected.uniform_more} more labels ({expected.uniform_total} in all"
            in text)
    assert (f"active: {expected.active_total} labels expected in a new labels file "
            f"(--select active --budget {expected.active_total})") in text


def test_too_few_labels_or_a_missing_file_give_no_plan_and_say_why(tmp_path: Path) -> None:
    run, _ = judged_pool(tmp_path)
    code, text = plan(run, tmp_path / "none-yet.jsonl", "0.1")
    assert code == 0
    assert "0 of 120 records labelled so far" in text
    assert "no plan: 0 records carry a label; a plan needs at least 10" in text
    assert not (tmp_path / "none-yet.jsonl").exists()  # planning writes nothing


@pytest.mark.parametrize("width", ["0", "-1", "nan"])
def test_a_width_that_is_not_positive_is_refused(tmp_path: Path, width: str, capsys) -> None:
    run, _ = judged_pool(tmp_path, records=12)
    code, _ = plan(run, tmp_path / "labels.jsonl", width)
    assert code == 2
    assert "--plan: the half-width must be positive" in capsys.readouterr().err


def test_labels_mixing_uniform_and_active_selection_are_refused(tmp_path: Path,
                                                                capsys) -> None:
    run, _ = judged_pool(tmp_path, records=12)
    labels = tmp_path / "labels.jsonl"
    written = LabelsFile(labels)
    written.append(LabelLine("q000", FAITH, 3, "ana", TIME))
    written.append(LabelLine("q001", FAITH, 3, "bo", TIME, selection="active",
                             probability=0.5, seed=0, position=4))
    code, _ = plan(run, labels, "0.1")
    assert code == 2
    assert "mix uniform and active selection" in capsys.readouterr().err


def test_an_active_file_is_planned_with_the_probabilities_its_lines_record(
        tmp_path: Path) -> None:
    run, scores = judged_pool(tmp_path)
    labels = tmp_path / "labels.jsonl"
    written = LabelsFile(labels)
    ids = list(scores)
    chances = {rid: 0.2 + 0.6 * (i % 2) for i, rid in enumerate(ids)}
    for i, rid in enumerate(ids[:40]):
        walk = {"selection": "active", "probability": chances[rid], "seed": 0, "position": i}
        if i % 4 == 3:
            written.append(LabelLine(rid, FAITH, None, "ana", TIME, passed=True, **walk))
        else:
            written.append(LabelLine(rid, FAITH, scores[rid] - (i % 5 == 0), "ana", TIME,
                                     **walk))
    code, text = plan(run, labels, "0.33")
    assert code == 0
    judged = np.array(list(scores.values()))
    human = np.full(len(judged), np.nan)
    probabilities = np.ones(len(judged))
    for i, rid in enumerate(ids[:40]):
        if i % 4 != 3:
            human[i] = scores[rid] - (i % 5 == 0)
            probabilities[i] = chances[rid]
    spread = [np.std([v, min(5.0, v + 1.0)], ddof=1) if i % 4 == 0 else 0.0
              for i, v in enumerate(judged)]
    expected = plan_labels(judged, human, 0.33, probabilities=probabilities,
                           uncertainty=spread)
    assert expected.active_more and expected.active_more > 1 and expected.uniform_total
    assert f"{FAITH}: 30 of 120 records labelled so far (active)" in text
    budget = expected.active_total
    assert budget is not None
    more = selection_probabilities(spread, budget)[40:].sum()  # the 80 records not decided
    assert (f"active: about {more:.0f} more labels expected from the 80 records the walk has "
            f"not decided, started again on this file with --select active --budget "
            f"{budget}") in text
    assert f"uniform: {expected.uniform_total} labels in a new labels file" in text
    for i, rid in enumerate(ids[40:]):  # the walk completed: a new file is the only way on
        walk = {"selection": "active", "probability": chances[rid], "seed": 0,
                "position": 40 + i}
        written.append(LabelLine(rid, FAITH, None, "ana", TIME, passed=True, **walk))
    _, text = plan(run, labels, "0.33")
    assert "active: the walk is complete; " in text and "in a new labels file" in text
