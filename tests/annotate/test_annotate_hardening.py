"""``rageval annotate`` under failure and abuse: errors while serving come back as JSON (no
empty reply), bad options exit 2, other methods and bad requests are refused with the security
headers, a foreign Host is refused, and the options are declared once."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from annotate_helpers import FAITH, serving, write_judged_run

SCORES = {"a": 2.0, "b": 4.0, "c": 5.0}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_judged_run(tmp_path / "r", SCORES)


# -- errors while serving --------------------------------------------------------------------

def test_a_labels_file_broken_while_serving_is_500_naming_the_line(run: Path, tmp_path: Path,
                                                                  capsys) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        assert client.label("a", 3)[0] == 200
        with labels.open("a", encoding="utf-8") as handle:  # written by hand meanwhile
            handle.write(json.dumps({"id": "q9", "metric": FAITH, "label": "x",
                                     "annotator": "bob", "time": "2024-01-01T00:00:00Z",
                                     "shown_judge": False}) + "\n")
        status, headers, data = client.request("GET", "/api/next")
    assert status == 500 and headers["Content-Type"].startswith("application/json")
    assert headers["X-Content-Type-Options"] == "nosniff"
    error = json.loads(data)["error"]
    assert f"{labels}, line 2, field 'label'" in error
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{labels}, line 2" in err


def test_a_disk_refusing_a_write_is_500_with_the_reason(run: Path, tmp_path: Path,
                                                        capsys, monkeypatch) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        def full(*args: object, **kwargs: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device", str(labels))

        monkeypatch.setattr(client.server.api.queue.labels, "append", full)
        status, answer = client.label("a", 3)
    assert status == 500
    assert answer["error"] == f"No space left on device: {labels}"
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [f"rageval: error: No space left on device: {labels}"]


def test_a_failed_fsync_names_the_labels_file(run: Path, tmp_path: Path, capsys,
                                              monkeypatch) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        def failed(*args: object, **kwargs: object) -> None:
            raise OSError(errno.EIO, "Input/output error")  # fsync names no file

        monkeypatch.setattr(client.server.api.queue.labels, "append", failed)
        status, answer = client.label("a", 3)
    assert status == 500 and answer["error"] == f"Input/output error: {labels}"
    assert "Traceback" not in capsys.readouterr().err


def test_a_bug_is_500_without_detail_and_its_traceback_on_stderr(run: Path, tmp_path: Path,
                                                                 capsys, monkeypatch) -> None:
    with serving(run, tmp_path / "labels.jsonl") as client:
        def broken() -> None:
            raise ZeroDivisionError("secret detail")

        monkeypatch.setattr(client.server.api.queue, "next", broken)
        status, answer = client.get("/api/next")
        assert client.get("/api/record", query="id=a")[0] == 200  # still serving
    assert status == 500 and answer == {"error": "internal error: ZeroDivisionError"}
    err = capsys.readouterr().err
    assert "Traceback" in err and "secret detail" in err
