"""``rageval annotate``'s server: the token, the bind address, the headers, blindness to the
judge, hostile record text, and every refusal of the JSON API."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest
from annotate_helpers import (
    FAITH,
    HOSTILE,
    annotate_args,
    demo_run,  # noqa: F401 - a fixture
    label_lines,
    serving,
    write_judged_run,
)

from rageval.annotate.command import build_server

SCORES = {"a": 2.0, "b": 4.0, "c": 5.0}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_judged_run(tmp_path / "r", SCORES, texts={"b": HOSTILE})


@pytest.mark.parametrize("token", [None, "wrong", "x" * 43])
@pytest.mark.parametrize(("method", "path"), [("GET", "/"), ("GET", "/api/next"),
                                              ("GET", "/api/record"), ("POST", "/api/label"),
                                              ("POST", "/api/undo"), ("GET", "/nowhere")])
def test_every_page_and_request_needs_the_token(run: Path, tmp_path: Path, token: str | None,
                                                method: str, path: str) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        body = json.dumps({"id": "a", "metric": FAITH, "label": 3}).encode() \
            if method == "POST" else None
        status, headers, data = client.request(method, path, body, token=token)
        assert status == 403
        assert "error" in json.loads(data) and b"<" not in data
        assert headers["X-Content-Type-Options"] == "nosniff"
    assert labels.read_text() == ""


def test_the_page_is_served_with_the_token_and_its_policy(run: Path, tmp_path: Path) -> None:
    with serving(run, tmp_path / "labels.jsonl") as client:
        status, headers, data = client.request("GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    page = data.decode()
    policy = headers["Content-Security-Policy"]
    assert policy.startswith("default-src 'none'; script-src 'sha256-")
    assert "connect-src 'self'" in policy and "unsafe-eval" not in policy
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in policy  # the page's one script is the one allowed
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"
    # Nothing fetched from elsewhere; record text is never written as markup by the script.
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script
    assert "textContent" in script


def test_it_binds_to_loopback_by_default(run: Path, tmp_path: Path, capsys) -> None:
    server = build_server(annotate_args(run, tmp_path / "l.jsonl"))
    try:
        assert server.server_address[0] == "127.0.0.1" and server.server_address[1] > 0
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{43}", server.url)
    finally:
        server.server_close()
    assert capsys.readouterr().err == ""  # no warning on loopback


def test_another_host_is_warned_about(run: Path, tmp_path: Path, capsys) -> None:
    server = build_server(annotate_args(run, tmp_path / "l.jsonl", "--host", "0.0.0.0"))
    try:
        assert "warning: --host 0.0.0.0" in capsys.readouterr().err
        assert server.url.startswith("http://127.0.0.1:")
    finally:
        server.server_close()


def test_each_start_has_its_own_token(run: Path, tmp_path: Path) -> None:
    tokens = set()
    for _ in range(3):
        server = build_server(annotate_args(run, tmp_path / "l.jsonl"))
        tokens.add(server.token)
        server.server_close()
    assert len(tokens) == 3


def test_blind_by_default(demo_run: Path, tmp_path: Path) -> None:  # noqa: F811
    labels = tmp_path / "labels.jsonl"
    with serving(demo_run, labels) as client:
        status, record = client.get("/api/next")
        assert status == 200
        assert set(record) == {"id", "metric", "query", "contexts", "answer", "reference",
                               "scale", "criterion", "progress", "annotator"}
        text = json.dumps(record)
        assert "reasoning" not in text and "judge" not in record
        status, shown = client.get("/api/record", query=f"id={record['id']}")
        assert status == 200 and "judge" not in shown
        assert record["scale"]["values"] == [1, 2, 3, 4, 5]
        assert record["scale"]["anchors"]["5"].startswith("Fully faithful")
        assert record["criterion"].startswith("Every claim")
        assert record["contexts"][0] == {"id": record["contexts"][0]["id"],
                                         "text": record["contexts"][0]["text"]}
        client.label(record["id"], 3)
    assert label_lines(labels)[0]["shown_judge"] is False


def test_show_judge_sends_the_judge_and_says_so(demo_run: Path,  # noqa: F811
                                                tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(demo_run, labels, "--show-judge") as client:
        _, record = client.get("/api/next")
        assert set(record["judge"]) == {"score", "reasoning"}
        assert record["judge"]["score"] in (1, 2, 3, 4, 5)
        assert record["judge"]["reasoning"]
        status, answer = client.label(record["id"], 2)
    assert status == 200 and answer["line"]["shown_judge"] is True
    assert label_lines(labels)[0]["shown_judge"] is True


def test_hostile_text_comes_back_as_json_text(run: Path, tmp_path: Path) -> None:
    with serving(run, tmp_path / "labels.jsonl") as client:
        status, headers, data = client.request("GET", "/api/record", query="id=b")
        _, _, page = client.request("GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(data)["answer"] == HOSTILE
    assert b"<script>alert" not in page and b"onerror" not in page


@pytest.mark.parametrize(("payload", "reason"), [
    ({"id": "a", "metric": FAITH, "label": 6}, "off the scale"),
    ({"id": "a", "metric": FAITH, "label": 0}, "off the scale"),
    ({"id": "a", "metric": FAITH, "label": 2.5}, "off the scale"),
    ({"id": "a", "metric": FAITH, "label": True}, "off the scale"),
    ({"id": "a", "metric": FAITH, "label": "3"}, "off the scale"),
    ({"id": "a", "metric": FAITH}, "off the scale"),
    ({"id": "zz", "metric": FAITH, "label": 3}, "unknown record"),
    ({"id": ["a"], "metric": FAITH, "label": 3}, "unknown record"),
    ({"id": "a", "metric": "judge:correctness", "label": 3}, "unknown metric"),
    ({"id": "a", "label": 3}, "unknown metric"),
    ([1, 2], "JSON object"),
])
def test_a_refused_label_is_400_with_the_reason(run: Path, tmp_path: Path, payload: object,
                                                reason: str) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        status, answer = client.post("/api/label", payload)
    assert status == 400 and reason in answer["error"]
    assert labels.read_text() == ""


def test_bad_bodies_are_400(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        assert client.post("/api/label", b"{not json")[0] == 400
        assert client.post("/api/label", b"\xff\xfe")[0] == 400
        status, answer = client.post("/api/label", b" " * (64 * 1024 + 1))
        assert status == 400 and "at most" in answer["error"]
        assert client.post("/api/skip", {"id": "nope", "metric": FAITH})[0] == 400
        status, answer = client.post("/api/undo", {})
        assert status == 400 and "no label" in answer["error"]
        assert client.get("/api/record", query="id=nope")[0] == 400
        assert client.get("/api/nothing")[0] == 404
        assert client.post("/api/nothing", {})[0] == 404
    assert labels.read_text() == ""


def test_a_second_label_of_a_record_is_refused(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(run, labels) as client:
        assert client.label("a", 3)[0] == 200
        status, answer = client.label("a", 4)
    assert status == 400 and "already labelled" in answer["error"]
    assert [line["label"] for line in label_lines(labels)] == [3]
