"""The labelling walk of ``rageval annotate``: the uniform order, the active draw and its passed
lines, labels written one by one, skip, undo and relabel, the judge's uncertainty, and the
command's errors."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from annotate_helpers import (
    FAITH,
    demo_run,  # noqa: F401 - a fixture
    label_lines,
    serving,
    write_judged_run,
)

from rageval.annotate.uncertainty import uncertainty
from rageval.annotate.walk import draw
from rageval.cli import main
from rageval.core.records.label_file import LabelsFileColumns
from rageval.stats.active import selection_probabilities

SCORES = {f"r{i:02d}": float(1 + i % 5) for i in range(30)}


def order(ids, seed: int = 0) -> list[str]:
    return sorted(ids, key=lambda i: int(hashlib.sha256(f"{seed}:{FAITH}:{i}".encode())
                                         .hexdigest(), 16))


def walk_through(client, value: int = 3) -> list[str]:
    """Label every record the walk offers, in its order; the ids labelled."""
    seen = []
    while True:
        status, record = client.get("/api/next")
        assert status == 200
        if record.get("done"):
            return seen
        assert client.label(record["id"], value)[0] == 200
        seen.append(record["id"])


def test_the_uniform_walk_is_the_seeded_order_and_resumes(tmp_path: Path) -> None:
    run = write_judged_run(tmp_path / "r", SCORES)
    labels = tmp_path / "labels.jsonl"
    first = []
    with serving(run, labels) as client:
        for _ in range(4):
            _, record = client.get("/api/next")
            assert client.label(record["id"], 4)[0] == 200
            first.append(record["id"])
            # Written and on disk before the answer came back, one line per label.
            assert [line["id"] for line in label_lines(labels)] == first
    with serving(run, labels) as client:  # a restart
        rest = walk_through(client)
        _, done = client.get("/api/next")
    assert first + rest == order(SCORES)
    assert done["done"] is True and done["progress"]["left"] == 0
    assert done["progress"]["labelled"] == 30
    lines = label_lines(labels)
    assert all(line["selection"] == "uniform" and "probability" not in line for line in lines)
    assert all(line["time"].endswith("Z") and line["annotator"] == "ana" for line in lines)


def test_another_seed_walks_another_order(tmp_path: Path) -> None:
    run = write_judged_run(tmp_path / "r", SCORES)
    with serving(run, tmp_path / "labels.jsonl", "--seed", "7") as client:
        _, record = client.get("/api/next")
    assert record["id"] == order(SCORES, seed=7)[0]
    assert order(SCORES, seed=7) != order(SCORES)


def test_skip_moves_a_record_to_the_end(tmp_path: Path) -> None:
    scores = dict(list(SCORES.items())[:4])
    run = write_judged_run(tmp_path / "r", scores)
    with serving(run, tmp_path / "labels.jsonl") as client:
        _, first = client.get("/api/next")
        status, answer = client.post("/api/skip", {"id": first["id"], "metric": FAITH})
        assert status == 200 and answer["progress"]["skipped"] == 1
        labelled = walk_through(client)
    assert labelled == [*order(scores)[1:], first["id"]]


def test_undo_takes_back_the_last_label_and_allows_a_relabel(tmp_path: Path) -> None:
    run = write_judged_run(tmp_path / "r", SCORES)
    labels = tmp_path / "labels.jsonl"
    a, b = order(SCORES)[:2]
    with serving(run, labels) as client:
        client.label(a, 2)
        client.label(b, 3)
        status, answer = client.post("/api/undo", {})
        assert status == 200 and answer["line"]["id"] == b and answer["line"]["undo"] is True
        assert answer["progress"]["labelled"] == 1
        _, record = client.get("/api/next")
        assert record["id"] == b  # the undone record comes back first
        assert client.get("/api/record", query=f"id={b}")[1]["label"] is None
        assert client.label(b, 5)[0] == 200  # a relabel after the undo
        assert client.get("/api/record", query=f"id={b}")[1]["label"] == 5
        assert client.post("/api/undo", {})[1]["line"]["id"] == b
        assert client.post("/api/undo", {})[1]["line"]["id"] == a
        assert client.post("/api/undo", {})[0] == 400  # nothing left to undo
    assert [(x["id"], x["label"], x.get("undo", False)) for x in label_lines(labels)] == [
        (a, 2, False), (b, 3, False), (b, None, True), (b, 5, False), (b, None, True),
        (a, None, True)]


def sampled_run(tmp_path: Path) -> tuple[Path, list[float]]:
    """A run judged twice per record (samples that differ on two records of three), and the
    spread of each record's samples: its uncertainty."""
    samples = {rid: {"samples": [s, s + (i % 3)]} for i, (rid, s) in enumerate(SCORES.items())}
    spread = [float(np.std(samples[rid]["samples"], ddof=1)) for rid in SCORES]
    return write_judged_run(tmp_path / "r", SCORES, details=samples), spread


def test_the_active_walk_offers_the_draw_and_passes_the_rest(tmp_path: Path) -> None:
    run, spread = sampled_run(tmp_path)
    labels = tmp_path / "labels.jsonl"
    ids = list(SCORES)
    pi = dict(zip(ids, selection_probabilities(spread, 8), strict=True))
    chosen = [i for i in order(ids) if draw(0, FAITH, i) < pi[i]]
    assert 0 < len(chosen) < len(ids)
    unselected = next(i for i in ids if i not in chosen)
    args = ("--select", "active", "--budget", "8")
    with serving(run, labels, *args) as client:
        status, answer = client.label(unselected, 3)
        assert status == 400 and "not selected" in answer["error"]
        labelled = walk_through(client)
        _, done = client.get("/api/next")
    assert labelled == chosen
    assert done["progress"]["total"] == len(chosen) and done["progress"]["pool"] == len(ids)
    with serving(run, labels, *args, "--annotator", "bo") as client:
        assert walk_through(client) == chosen  # another annotator: the same draw
    lines = label_lines(labels)
    passed = [line for line in lines if line.get("passed")]
    assert sorted(line["id"] for line in passed) == sorted(set(ids) - set(chosen))  # once each
    assert all(line["label"] is None and line["selection"] == "active" for line in passed)
    for line in lines:
        assert line["probability"] == pytest.approx(pi[line["id"]], rel=1e-12)
    # Each passed line was written when the walk moved past its record, before the next label.
    first_label = next(n for n, line in enumerate(lines) if not line.get("passed"))
    assert {line["id"] for line in lines[:first_label]} == \
        set(order(ids)[:order(ids).index(chosen[0])])


def test_a_file_labelled_another_way_is_refused(tmp_path: Path, capsys) -> None:
    run = write_judged_run(tmp_path / "r", SCORES)
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        client.label("r01", 3)
    argv = ["annotate", str(run), "--metric", FAITH, "--labels", str(labels)]
    assert main([*argv, "--select", "active"], stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert f"{labels}, line 1" in err and "--select active" in err
    labels.unlink()
    with serving(run, labels, "--select", "active", "--budget", "5") as client:
        walk_through(client)
    assert main([*argv, "--select", "active", "--seed", "1"], stdout=io.StringIO()) == 2
    assert "started with --seed 0, this one with --seed 1" in capsys.readouterr().err
    other = write_judged_run(tmp_path / "other", {f"x{k}": 3.0 for k in range(6)} | SCORES)
    assert main(["annotate", str(other), "--metric", FAITH, "--labels", str(labels),
                 "--select", "active"], stdout=io.StringIO()) == 2
    assert "labelled on another run's records" in capsys.readouterr().err


def test_a_later_walk_with_another_budget_keeps_what_the_file_decided(tmp_path: Path) -> None:
    run, spread = sampled_run(tmp_path)
    labels = tmp_path / "labels.jsonl"
    ids = list(SCORES)
    small = dict(zip(ids, selection_probabilities(spread, 3), strict=True))
    large = dict(zip(ids, selection_probabilities(spread, 9), strict=True))
    with serving(run, labels, "--select", "active", "--budget", "3") as client:
        _, first = client.get("/api/next")
        assert client.label(first["id"], 4)[0] == 200  # one label, then stop
    decided = {line["id"]: line for line in label_lines(labels)}
    with serving(run, labels, "--select", "active", "--budget", "9") as client:
        walk_through(client)
    lines = label_lines(labels)
    for line in lines:  # a record's first line decided it, with the chance of its walk
        chance = small if line["id"] in decided else large
        assert line["probability"] == pytest.approx(chance[line["id"]], rel=1e-12)
        assert (line["seed"], line["position"]) == (0, order(ids).index(line["id"]))
    assert {line["budget"] for line in lines} == {3.0, 9.0}  # each walk says its budget
    pool = LabelsFileColumns(str(labels), {FAITH: (1, 5)}).metrics[FAITH].pool
    assert pool is not None and pool.budgets == (3.0, 9.0)
    for record_id in ids:
        mine = [line for line in lines if line["id"] == record_id]
        chance = small if record_id in decided else large
        selected = draw(0, FAITH, record_id) < chance[record_id]
        kinds = [("passed" if line.get("passed") else "drawn" if line.get("drawn")
                  else "label") for line in mine]
        assert kinds == (["drawn", "label"] if selected else ["passed"])


def test_uncertainty_is_the_samples_spread_then_the_panel_then_the_scale() -> None:
    assert uncertainty(3.0, {"samples": [2, 4, 3]}, 1, 5) == pytest.approx(1.0)
    assert uncertainty(3.0, {"samples": [3], "spread": 2.0}, 1, 5) == 2.0
    assert uncertainty(3.0, {}, 1, 5) == 1.0
    assert uncertainty(1.0, {}, 1, 5) == 0.0 == uncertainty(5.0, {}, 1, 5)
    assert uncertainty(4.0, {}, 1, 5) == 0.5
    assert uncertainty(2.0, {"spread": None}, 0, 3) == pytest.approx(2 / 3)


def _annotate(argv: list[str], capsys) -> tuple[int, str]:
    code = main(["annotate", *argv], stdout=io.StringIO())
    return code, capsys.readouterr().err


def test_command_errors_exit_2_without_a_traceback(demo_run: Path,  # noqa: F811
                                                   tmp_path: Path, capsys) -> None:
    labels = str(tmp_path / "labels.jsonl")
    code, err = _annotate([str(tmp_path / "nope"), "--metric", FAITH, "--labels", labels],
                          capsys)
    assert code == 2 and "not a run directory" in err
    code, err = _annotate([str(demo_run), "--metric", "judge:correctness", "--labels", labels],
                          capsys)
    assert code == 2 and "no such metric" in err and "judge:faithfulness" in err
    code, err = _annotate([str(demo_run), "--metric", "ndcg@3", "--labels", labels], capsys)
    assert code == 2 and "not a rubric judge metric" in err and "judge:faithfulness" in err
    code, err = _annotate([str(demo_run), "--metric", "judge:context_relevance", "--labels",
                           labels], capsys)
    assert code == 2 and "one context at a time" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "q1", "metric": FAITH, "label": "four",
                               "annotator": "ana", "time": "t"}) + "\n")
    code, err = _annotate([str(demo_run), "--metric", FAITH, "--labels", str(bad)], capsys)
    assert code == 2 and f"{bad}, line 1, field 'label'" in err
    code, err = _annotate([str(demo_run), "--metric", FAITH, "--labels", labels, "--records",
                           str(tmp_path / "missing.jsonl")], capsys)
    assert code == 2 and "missing.jsonl" in err
    for err in (capsys.readouterr().err,):
        assert "Traceback" not in err


def test_the_records_file_moved_is_given_with_records(tmp_path: Path, capsys) -> None:
    run = write_judged_run(tmp_path / "r", SCORES)
    source = tmp_path / "r" / "records.source.jsonl"
    moved = source.rename(tmp_path / "moved.jsonl")
    labels = tmp_path / "labels.jsonl"
    code, err = _annotate([str(run), "--metric", FAITH, "--labels", str(labels)], capsys)
    assert code == 2 and "no longer exists" in err and "--records FILE" in err
    with serving(run, labels, "--records", str(moved)) as client:
        _, record = client.get("/api/next")
    assert record["query"] == f"query of {record['id']}"


@pytest.mark.parametrize(("option", "message"), [
    (["--budget", "0"], "--budget: must be positive"),
    (["--port", "70000"], "--port: must be in 0-65535"),
    (["--annotator", " "], "--annotator: must not be empty"),
    (["--select", "random"], "invalid choice"),
])
def test_bad_options_exit_2(tmp_path: Path, capsys, option: list[str], message: str) -> None:
    run = write_judged_run(tmp_path / "r", SCORES)
    code, err = _annotate([str(run), "--metric", FAITH, "--labels",
                           str(tmp_path / "l.jsonl"), *option], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_a_selected_record_skipped_for_good_ends_the_pool_the_calibration_reads(
        tmp_path: Path) -> None:
    run, _ = sampled_run(tmp_path)
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels, "--select", "active", "--budget", "8") as client:
        _, first = client.get("/api/next")
        assert client.label(first["id"], 3)[0] == 200
        _, skipped = client.get("/api/next")
        client.post("/api/skip", {"id": skipped["id"], "metric": FAITH})
        while True:  # label the rest of the walk, never coming back to the skipped record
            _, item = client.get("/api/next")
            if item.get("done") or item["id"] == skipped["id"]:
                break
            assert client.label(item["id"], 4)[0] == 200
    ids = order(list(SCORES))
    columns = LabelsFileColumns(str(labels), {FAITH: (1, 5)})
    pool = columns.metrics[FAITH].pool
    assert pool is not None and pool.cut == ids.index(skipped["id"])
    assert pool.blocking == skipped["id"]  # drawn when it was shown, never labelled
    assert set(pool.chances) == set(ids[:pool.cut])  # nothing after the skipped record
    assert pool.waiting == sum(1 for line in label_lines(labels) if line["label"] is not None
                               and ids.index(line["id"]) > pool.cut)


def test_a_record_shown_is_drawn_for_good_before_it_is_labelled(tmp_path: Path) -> None:
    run, spread = sampled_run(tmp_path)
    labels = tmp_path / "labels.jsonl"
    ids = list(SCORES)
    small = dict(zip(ids, selection_probabilities(spread, 3), strict=True))
    with serving(run, labels, "--select", "active", "--budget", "3") as client:
        _, shown = client.get("/api/next")  # shown, then the annotator stops
    drawn = [line for line in label_lines(labels) if line.get("drawn")]
    assert [(x["id"], x["label"]) for x in drawn] == [(shown["id"], None)]
    assert drawn[0]["probability"] == pytest.approx(small[shown["id"]], rel=1e-12)
    with serving(run, labels, "--select", "active", "--budget", "9", "--annotator",
                 "bo") as client:
        _, first = client.get("/api/next")
        assert first["id"] == shown["id"]  # not drawn again at the larger budget
        _, written = client.label(first["id"], 2)
    assert written["line"]["probability"] == drawn[0]["probability"]


def test_a_label_moves_the_walk_on_even_when_no_next_record_is_asked_for(
        tmp_path: Path) -> None:
    run, _ = sampled_run(tmp_path)
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels, "--select", "active", "--budget", "6") as client:
        _, first = client.get("/api/next")
        assert client.label(first["id"], 4)[0] == 200  # a script that stops here
    lines = label_lines(labels)
    ids = order(list(SCORES))
    after = lines[[x["id"] for x in lines].index(first["id"]) + 2:]  # past its draw and label
    assert after, "the label wrote the walk on to the next record drawn"
    assert all(x.get("passed") for x in after[:-1]) and after[-1].get("drawn")
    assert [x["id"] for x in after] == ids[ids.index(first["id"]) + 1:
                                           ids.index(after[-1]["id"]) + 1]


def test_servers_started_together_with_other_selections_never_mix_lines(
        tmp_path: Path) -> None:
    run, _ = sampled_run(tmp_path)
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as uniform, \
            serving(run, labels, "--select", "active", "--annotator", "bo") as active:
        _, item = uniform.get("/api/next")
        assert uniform.label(item["id"], 3)[0] == 200
        status, answer = active.get("/api/next")
        assert status == 400 and "a uniform line for judge:faithfulness" in answer["error"]
    with serving(run, labels, "--seed", "3") as other_seed:  # uniform walks have no seed
        assert other_seed.get("/api/next")[0] == 200
    assert all(x["selection"] == "uniform" for x in label_lines(labels))
