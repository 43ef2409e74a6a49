"""``rageval annotate`` as separate processes: the printed address, SIGTERM ends it with 0, a
SIGKILL loses no acknowledged label and a restart resumes, and two annotators' processes
writing one labels file at once lose nothing and never label a record twice each."""

from __future__ import annotations

import signal
import threading
from collections import Counter
from pathlib import Path

import pytest
from annotate_helpers import FAITH, Annotator, label_lines, write_judged_run

SCORES = {f"r{i:02d}": float(1 + i % 5) for i in range(24)}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_judged_run(tmp_path / "r", SCORES)


def test_sigterm_ends_it_cleanly(run: Path, tmp_path: Path) -> None:
    annotator = Annotator(run, tmp_path / "labels.jsonl", "ana")
    assert annotator.call("GET", "/api/next")[0] == 200
    assert annotator.stop(signal.SIGTERM) == (0, "")


def test_a_killed_server_loses_no_label_and_a_restart_resumes(run: Path,
                                                              tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    annotator = Annotator(run, labels, "ana")
    acknowledged = []
    for _ in range(5):
        _, record = annotator.call("GET", "/api/next")
        status, _ = annotator.call("POST", "/api/label",
                                   {"id": record["id"], "metric": FAITH, "label": 4})
        assert status == 200
        acknowledged.append(record["id"])
    annotator.stop(signal.SIGKILL)
    assert [line["id"] for line in label_lines(labels)] == acknowledged
    again = Annotator(run, labels, "ana")
    try:
        _, record = again.call("GET", "/api/next")
        assert record["id"] not in acknowledged
        assert record["progress"]["labelled"] == 5
        assert again.call("POST", "/api/label", {"id": acknowledged[0], "metric": FAITH,
                                                 "label": 1})[0] == 400
    finally:
        again.stop(signal.SIGTERM)


def test_two_annotators_at_once_lose_nothing(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    annotators = [Annotator(run, labels, name) for name in ("ana", "bo")]
    answers: list[tuple[str, str, int]] = []
    lock = threading.Lock()

    def post_all(annotator: Annotator, name: str) -> None:
        # Every record twice, so that each process also races itself for the same record.
        for rid in [*SCORES, *SCORES]:
            status, _ = annotator.call("POST", "/api/label",
                                       {"id": rid, "metric": FAITH, "label": 3})
            with lock:
                answers.append((name, rid, status))

    threads = [threading.Thread(target=post_all, args=(a, n))
               for a, n in zip(annotators, ("ana", "bo"), strict=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for annotator in annotators:
        annotator.stop(signal.SIGTERM)
    lines = label_lines(labels)
    written = Counter((line["annotator"], line["id"]) for line in lines)
    assert written == Counter({(name, rid): 1 for name in ("ana", "bo") for rid in SCORES})
    accepted = Counter((name, rid) for name, rid, status in answers if status == 200)
    assert accepted == written  # every acknowledged label is in the file, and only those
    assert Counter(status for *_, status in answers) == {200: 48, 400: 144}
