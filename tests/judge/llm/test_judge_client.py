"""Tests of the judge client against the loopback OpenAI-compatible server (real HTTP)."""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import (
    TOO_LONG_MESSAGES,
    TOO_LONG_SERVERS,
    JudgeServer,
    judge_score,
    wire_format,
)

from rageval.core.errors import RagevalError
from rageval.judge.llm.cache.store import JudgeCache
from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.transport.client import (
    JudgeClient,
    JudgeError,
    JudgeRequest,
    JudgeResult,
    total_usage,
)
from rageval.judge.llm.transport.formats import ReplySchema

KEY = "sk-test-DO-NOT-LEAK-0123456789abcdef"
ENV = "RAGEVAL_TEST_JUDGE_KEY"
SCHEMA = ReplySchema("verdict", {"type": "object",
                                 "properties": {"score": {"type": "integer"}}})


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


@pytest.fixture
def make_client(monkeypatch: pytest.MonkeyPatch, server: JudgeServer
                ) -> Callable[..., JudgeClient]:
    monkeypatch.setenv(ENV, KEY)

    def make(**kw: object) -> JudgeClient:
        opts: dict = {"base_url": server.base_url, "api_key_env": ENV, "timeout": 5.0,
                      "max_retries": 3}
        opts.update(kw)
        backend = opts.pop("backend", None)
        return JudgeClient(JudgeConfig(model="judge-model", **opts), backend=backend)

    return make


def reqs(n: int, **kw: object) -> list[JudgeRequest]:
    return [JudgeRequest([{"role": "system", "content": "Grade it."},
                          {"role": "user", "content": f"q{i}"}], tag=i, **kw)  # type: ignore[arg-type]
            for i in range(n)]


def score(r: JudgeResult) -> int:
    assert r.text is not None
    return int(json.loads(r.text)["score"])


def test_concurrency_overlaps_and_usage(server: JudgeServer, make_client: Callable) -> None:
    server.latency_s = 0.1
    client = make_client()
    seen: list[tuple[int, int]] = []
    t0 = time.monotonic()
    out = client.complete_many(reqs(32), concurrency=8,
                               on_result=lambda r: seen.append((r.index, threading.get_ident())))
    elapsed = time.monotonic() - t0
    assert 0.35 < elapsed < 1.6, elapsed  # ~4 x 100 ms, not 32 x 100 ms
    assert [r.index for r in out] == list(range(32))
    assert [r.request.tag for r in out] == list(range(32))
    assert all(r.ok and r.finish_reason == "stop" and not r.structured for r in out)
    assert [score(r) for r in out] == [judge_score(f"q{i}") for i in range(32)]
    assert sorted(i for i, _ in seen) == list(range(32))
    assert {tid for _, tid in seen} == {threading.get_ident()}  # callbacks in caller's thread
    assert server.requests == 32
    totals = total_usage(out)
    assert totals["total_tokens"] == sum(r.usage["total_tokens"] for r in out) > 0
    assert totals["prompt_tokens"] == 32 * 3  # "Grade it." + "qN"
    assert client.usage == totals


def test_request_body_parameters(server: JudgeServer, make_client: Callable) -> None:
    make_client().complete_many(reqs(1))
    body = server.bodies[-1]
    assert body["temperature"] == 0 and "seed" not in body and "response_format" not in body
    make_client(seed=1234, max_tokens=99, extra={"top_k": 1}).complete_many(reqs(1))
    body = server.bodies[-1]
    assert body["seed"] == 1234 and body["max_tokens"] == 99 and body["top_k"] == 1
    assert body["model"] == "judge-model"


def test_429_with_retry_after_is_retried(server: JudgeServer, make_client: Callable) -> None:
    server.fail_for("q1", "429:1")
    t0 = time.monotonic()
    out = make_client().complete_many(reqs(3))
    assert time.monotonic() - t0 >= 0.95  # waited as told
    assert all(r.ok for r in out)
    assert server.faults_served.count("429:1") == 1 and server.requests == 4


def test_500_and_dropped_connection_retried(server: JudgeServer, make_client: Callable) -> None:
    server.fail_for("q0", "500", "503")
    server.fail_for("q2", "drop")
    out = make_client().complete_many(reqs(3))
    assert all(r.ok for r in out)
    assert server.requests == 6
    assert score(out[0]) == judge_score("q0")


def test_timeout_retried(server: JudgeServer, make_client: Callable) -> None:
    server.hang_s = 1.5
    server.fail_for("q1", "timeout")
    out = make_client(timeout=0.3).complete_many(reqs(2))
    assert all(r.ok for r in out)
    assert server.requests == 3


def test_transient_failure_for_good_is_an_unscored_result(server: JudgeServer,
                                                          make_client: Callable) -> None:
    server.fail_for("q1", "500", "500")
    server.fail_for("q2", "bad_body")
    out = make_client(max_retries=1).complete_many(reqs(4))
    assert [r.ok for r in out] == [True, False, False, True]
    assert out[1].text is None and "HTTP 500" in (out[1].error or "")
    assert "malformed response" in (out[2].error or "")
    assert out[1].usage == {} and total_usage(out)["total_tokens"] > 0


def test_malformed_replies_are_returned_verbatim(server: JudgeServer,
                                                 make_client: Callable) -> None:
    server.fail_for("q0", "prose")
    server.fail_for("q1", "out_of_range")
    server.fail_for("q2", "bad_json")
    out = make_client().complete_many(reqs(3))
    assert all(r.ok for r in out)  # parsing them is the parser's job
    assert "score" not in (out[0].text or "")
    assert json.loads(out[1].text or "")["score"] == 9


def test_401_stops_the_run_without_leaking_the_key(server: JudgeServer,
                                                   make_client: Callable) -> None:
    server.latency_s = 0.05
    server.always = "401"
    client = make_client()
    with pytest.raises(JudgeError) as info:
        client.complete_many(reqs(40), concurrency=4)
    # Every worker's first reply is the 401, so nothing beyond the first 4 was ever sent.
    assert 1 <= server.requests <= 4
    err = info.value
    assert isinstance(err, RagevalError) and err.exit_code == 2
    text = str(err)
    assert "401" in text and ENV in text and "judge-model" in text
    assert text.endswith("; the run stopped before any reply")  # not after "0 of 40"
    everything = " ".join([text, repr(err), err.format(), repr(client),
                           "".join(traceback.format_exception(err)),
                           repr(err.results)])
    assert KEY not in everything
    assert KEY not in server.bodies[0].get("messages", [{}])[0].get("content", "")


def test_401_mid_run_starts_nothing_new(server: JudgeServer, make_client: Callable) -> None:
    server.latency_s = 0.05
    server.fail_for("q10", "401")
    stored: list[int] = []
    with pytest.raises(JudgeError) as info:
        make_client().complete_many(reqs(60), concurrency=4,
                                    on_result=lambda r: stored.append(r.index))
    # The 401 went out latency_s after q10 arrived. Requests racing it (replies that arrived
    # with it) may still start; nothing may start a whole round later.
    i401 = server.faults_served.index("401")
    sent_401 = server.arrivals[i401] + server.latency_s
    assert all(t < sent_401 + server.latency_s for t in server.arrivals), "started after the 401"
    assert server.requests <= 20
    results = info.value.results
    assert len(results) == 60 and results[10] is None
    done = [r.index for r in results if r is not None]
    assert sorted(stored) == sorted(done) and set(range(10)) <= set(done)
    assert f"{len(done)} of 60" in str(info.value)


@pytest.mark.parametrize(("fault", "words"), [
    ("400", "rejected"), ("403", "permission"), ("404", "not found"), ("quota", "quota")])
def test_other_permanent_errors_stop(server: JudgeServer, make_client: Callable, fault: str,
                                     words: str) -> None:
    server.always = fault
    with pytest.raises(JudgeError, match=words):
        make_client(max_retries=0).complete_many(reqs(10), concurrency=2)
    assert server.requests <= 2


def test_response_format_refusal_falls_back_once_per_endpoint(server: JudgeServer,
                                                            make_client: Callable) -> None:
    server.reject_response_format = True
    server.latency_s = 0.02
    client = make_client()
    assert client.structured_output is None
    out = client.complete_many(reqs(12, schema=SCHEMA), concurrency=4)
    assert all(r.ok and not r.structured and r.format == "text" for r in out)
    # Each of the three structured formats was refused once, by one probe, never retried.
    assert [wire_format(b) for b in server.bodies[:3]] == [
        "json_schema", "json_object+schema", "json_object"]
    assert sum("response_format" in b for b in server.bodies) == 3
    assert server.requests == 12 + 3
    assert client.structured_output is False
    assert set(client.refused_formats) == {"json_schema", "json_object+schema", "json_object"}
    client.complete_many(reqs(5, schema=SCHEMA), concurrency=4)
    assert sum("response_format" in b for b in server.bodies) == 3
    # A new client given the same backend (the run's, for this endpoint and model) knows the
    # verdict; one with a backend of its own (another run) learns it anew.
    other = make_client(backend=client.backend)
    assert other.structured_output is False
    other.complete_many(reqs(2, schema=SCHEMA))
    assert sum("response_format" in b for b in server.bodies) == 3
    another_run = make_client()
    assert another_run.structured_output is None and another_run.refused_formats == {}
    another_run.complete_many(reqs(2, schema=SCHEMA), concurrency=1)
    assert sum("response_format" in b for b in server.bodies) == 6


@pytest.mark.parametrize("status", [400, 422, 500])
def test_a_refused_json_schema_costs_one_request_and_steps_down(
        server: JudgeServer, make_client: Callable, status: int) -> None:
    """llama.cpp answers json_schema with a 500 naming the response format; vLLM-like
    validators with 422; OpenAI-like proxies with 400: one request each, no retries, then the
    schema goes in llama.cpp's json_object form."""
    server.refuse = {"json_schema": status}
    client = make_client(max_retries=5)
    out = client.complete_many(reqs(10, schema=SCHEMA), concurrency=4)
    assert all(r.ok and r.format == "json_object+schema" for r in out)
    formats = [wire_format(b) for b in server.bodies]
    assert formats.count("json_schema") == 1 and server.requests == 11
    assert all(b["response_format"] == {"type": "json_object", "schema": SCHEMA.schema}
               for b in server.bodies[1:])
    assert f"HTTP {status}" in client.refused_formats["json_schema"]


def test_a_plain_500_is_not_a_refusal(server: JudgeServer, make_client: Callable) -> None:
    """A server error that does not name the response format says nothing about it: the probe
    is sent again (with its remaining retries) in the same format."""
    server.fail_next("500")
    client = make_client(max_retries=2)
    out = client.complete_many(reqs(3, schema=SCHEMA), concurrency=1)
    assert all(r.ok and r.format == "json_schema" for r in out)
    assert [wire_format(b) for b in server.bodies] == ["json_schema"] * 4
    assert client.refused_formats == {}


def test_explicit_format_refused_is_one_clear_error(server: JudgeServer,
                                                    make_client: Callable) -> None:
    server.refuse = {"json_schema": 500}
    client = make_client(response_format="json_schema", max_retries=5)
    with pytest.raises(JudgeError) as info:
        client.complete_many(reqs(8, schema=SCHEMA), concurrency=4)
    message = str(info.value)
    assert "refuses the response format 'json_schema'" in message and "HTTP 500" in message
    assert "--judge-response-format auto" in message
    assert server.requests == 1  # one request, not six retries per judgment


def test_json_object_mode_falls_back_to_plain_json_object(server: JudgeServer,
                                                          make_client: Callable) -> None:
    server.refuse = {"json_schema": 400, "json_object+schema": 400}
    client = make_client(response_format="json_object")
    out = client.complete_many(reqs(4, schema=SCHEMA), concurrency=2)
    assert all(r.format == "json_object" for r in out)
    assert "json_schema" not in [wire_format(b) for b in server.bodies]  # not in this ladder
    text = make_client(response_format="text").complete_many(reqs(2, schema=SCHEMA))
    assert all(r.format == "text" for r in text)
    assert all("response_format" not in b for b in server.bodies[-2:])


def test_response_format_sent_when_accepted(server: JudgeServer, make_client: Callable) -> None:
    client = make_client()
    out = client.complete_many(reqs(6, schema=SCHEMA), concurrency=3)
    assert all(r.ok and r.structured and r.format == "json_schema" for r in out)
    assert all(b.get("response_format") == SCHEMA.wire("json_schema") for b in server.bodies)
    assert client.structured_output is True


def test_the_first_requests_failing_alike_stop_the_run(server: JudgeServer,
                                                       make_client: Callable) -> None:
    """A server that fails every request the same way: the run stops after the first few
    with the server's words, instead of retrying all of them."""
    server.always = "503"
    client = make_client(max_retries=0)
    with pytest.raises(JudgeError) as info:
        client.complete_many(reqs(40), concurrency=2)
    message = str(info.value)
    assert f"judge endpoint {server.base_url}" in message
    assert re.search(r"is taken for dead, and the run stopped: no reply to any of the [34] "
                     r"requests sent, all failing alike", message)
    assert "HTTP 503: The server had an error processing your request." in message
    assert server.requests <= 3 + 2  # 3, and those the two workers had already started


def _dead_port() -> int:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dead_endpoint_fails_fast(make_client: Callable) -> None:
    client = make_client(base_url=f"http://127.0.0.1:{_dead_port()}/v1", max_retries=1)
    with pytest.raises(JudgeError, match=r"the connection was refused") as info:
        client.complete_many(reqs(50), concurrency=4)
    # At most those already in flight were sent; the other 40-odd never were.
    assert sum(r is not None for r in info.value.results) <= 4


@pytest.mark.parametrize("schema", [SCHEMA, None])
def test_a_refused_connection_before_any_reply_fails_in_seconds_naming_the_url(
        make_client: Callable, schema: ReplySchema | None) -> None:
    """Nothing listening is no passing fault: no retry, no backoff (it took 6 attempts and
    about 28 s with the default retries), and the message names the URL, its password
    masked."""
    port = _dead_port()
    client = make_client(base_url=f"http://user:SECRETPW9@127.0.0.1:{port}/v1", max_retries=5)
    started = time.monotonic()
    with pytest.raises(JudgeError) as info:
        client.complete_many(reqs(3, schema=schema), concurrency=4)
    assert time.monotonic() - started < 3
    assert str(info.value) == (
        f"judge endpoint http://***@127.0.0.1:{port}/v1 (model 'judge-model'): the connection "
        "was refused: nothing listens there (is the server running, and is --judge-base-url "
        "right?); the run stopped before any reply")
    assert all(r is None for r in info.value.results)


def test_a_refused_connection_after_a_reply_keeps_its_retries(server: JudgeServer,
                                                              make_client: Callable) -> None:
    """Once the endpoint has answered, a refused connection is a server gone for a moment
    (restarting): each request is retried, fails alone, and the run goes on."""
    def stop_after_first(result: JudgeResult) -> None:
        if result.index == 0:
            server.stop()  # no new connection is accepted; the one kept alive is dropped next

    server.fail_next(None, "drop")
    out = make_client(max_retries=1).complete_many(reqs(3), concurrency=1, rpm=240,
                                                   on_result=stop_after_first)
    assert [r.ok for r in out] == [True, False, False]
    assert all(r.error is not None and r.error.startswith("connection failed after 2 attempts")
               for r in out[1:])


def test_a_judge_that_answers_nothing_stops_with_one_message_however_few_its_requests(
        server: JudgeServer, make_client: Callable) -> None:
    """Three requests all failing used to be handed back, the run going on; eight stopped
    after three: both stop now, with the same message."""
    server.always = "503"
    messages = {}
    for n in (1, 3, 8):
        with pytest.raises(JudgeError) as info:
            make_client(max_retries=0).complete_many(reqs(n, schema=SCHEMA), concurrency=4)
        messages[n] = str(info.value)
    where = f"judge endpoint {server.base_url} (model 'judge-model') is taken for dead"
    assert messages[3] == messages[8] == (
        f"{where}, and the run stopped: no reply to any of the 3 requests sent, all failing "
        "alike (--judge-timeout and --judge-max-retries set the patience per request): "
        "HTTP 503: The server had an error processing your request.")
    assert messages[1].startswith(f"{where}, and the run stopped: no reply to its one request")
    server.always = None
    server.fail_next("503", "500")
    with pytest.raises(JudgeError, match=r"no reply to any of the 2 requests sent, failing 2 "
                                         r"ways, the first .*: HTTP 503"):
        make_client(max_retries=0).complete_many(reqs(2), concurrency=1)


def test_mixed_failures_do_not_stop_the_run(server: JudgeServer, make_client: Callable) -> None:
    server.fail_next("500", "503", "500")
    out = make_client(max_retries=0).complete_many(reqs(6), concurrency=1)
    assert [r.ok for r in out] == [False, False, False, True, True, True]


@pytest.mark.parametrize("wording", TOO_LONG_SERVERS)
def test_an_over_long_prompt_fails_that_request_only(server: JudgeServer, make_client: Callable,
                                                     wording: str) -> None:
    """Each server's own words (and body) for a prompt over the context: that request fails
    with them, the run goes on."""
    server.fail_for("q1", f"too_long:{wording}")
    out = make_client().complete_many(reqs(4), concurrency=1)
    assert [r.ok for r in out] == [True, False, True, True]
    assert out[1].error == f"HTTP 400: {TOO_LONG_MESSAGES[wording]}"


def test_a_400_that_is_not_about_length_still_stops_the_run(server: JudgeServer,
                                                            make_client: Callable) -> None:
    server.fail_for("q1", "400")
    with pytest.raises(JudgeError, match="HTTP 400, the endpoint rejected the request"):
        make_client().complete_many(reqs(4), concurrency=1)


def test_credentials_in_the_base_url_never_show(server: JudgeServer,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """User info and query values of the base URL are credentials: requests carry them, and
    no description, result or error shows them."""
    monkeypatch.setenv(ENV, KEY)
    host = server.base_url.removeprefix("http://")
    url = f"http://user:PASSWORD-SECRET@{host}?api-key=QUERY-SECRET"
    client = JudgeClient(JudgeConfig(
        model="judge-model", base_url=url, api_key_env=ENV, max_retries=0))
    assert client.public_endpoint == server.base_url
    assert "SECRET" not in repr(client)
    out = client.complete_many(reqs(2))
    assert all(r.ok for r in out)
    assert server.paths[-1].endswith("/chat/completions?api-key=QUERY-SECRET")
    summary = client.request_summary(reqs(1)[0])
    assert "SECRET" not in json.dumps(summary) and summary["endpoint"] == server.base_url
    server.always = "404"
    with pytest.raises(JudgeError) as info:
        client.complete_many(reqs(1))
    assert "SECRET" not in str(info.value) and "***" in str(info.value)


def test_rpm_limit(server: JudgeServer, make_client: Callable) -> None:
    t0 = time.monotonic()
    out = make_client().complete_many(reqs(6), concurrency=6, rpm=600)  # one per 100 ms
    assert time.monotonic() - t0 >= 0.45
    assert len(out) == 6


def test_results_go_to_the_cache_as_they_arrive(tmp_path: Path, server: JudgeServer,
                                                make_client: Callable) -> None:
    client = make_client(seed=3)
    batch = reqs(10)
    keys = [client.cache_key(r) for r in batch]
    assert len(set(keys)) == 10
    assert client.cache_key(JudgeRequest(batch[0].messages, sample_index=1)) != keys[0]
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        def store(r: JudgeResult) -> None:
            if r.ok:
                assert r.text is not None
                cache.put(client.cache_key(r.request), client.request_summary(r.request),
                          r.text, r.usage)

        server.fail_for("q4", "401")
        with pytest.raises(JudgeError):
            client.complete_many(batch, concurrency=2, on_result=store)
        missing = cache.missing(keys)
        assert keys[4] in missing and keys[0] not in missing
        client.complete_many([batch[keys.index(k)] for k in missing], on_result=store)
        assert cache.missing(keys) == []
        assert cache.stats()["total_tokens"] > 0
    dump = (tmp_path / "c.sqlite").read_bytes()
    assert KEY.encode() not in dump


@pytest.mark.parametrize("hook", ["on_result", "on_drained"])
def test_a_callback_error_stops_the_run(server: JudgeServer, make_client: Callable,
                                        hook: str) -> None:
    def boom(*_: object) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        make_client().complete_many(reqs(20), concurrency=2, **{hook: boom})
    assert server.requests <= 4


def test_results_arriving_together_are_handed_over_in_one_lot(server: JudgeServer,
                                                             make_client: Callable) -> None:
    server.latency_s = 0.1
    events: list[str] = []
    out = make_client().complete_many(reqs(24), concurrency=8,
                                      on_result=lambda r: events.append("result"),
                                      on_drained=lambda: events.append("drained"))
    assert all(r.ok for r in out)
    assert events.count("result") == 24
    assert events[0] == "result" and events[-1] == "drained"  # every lot is followed by one
    lots = events.count("drained")
    assert lots < 24  # results that came in one wave were handed over together
    assert "drained" not in [events[i] for i in range(1, len(events))
                             if events[i - 1] == "drained"]  # never an empty lot


def test_messages_with_content_parts_are_sent_as_given(server: JudgeServer,
                                                       make_client: Callable) -> None:
    """Plain-text messages go out as they are; others go through the SDK's typed parameters,
    and arrive the same."""
    parts = [{"role": "system", "content": "Grade it."},
             {"role": "user", "content": [{"type": "text", "text": "q7"}]}]
    plain = reqs(1)[0]
    out = make_client().complete_many([JudgeRequest(parts, SCHEMA), plain])
    assert all(r.ok for r in out)
    assert server.bodies[0]["messages"] == parts or server.bodies[1]["messages"] == parts
    assert [dict(m) for m in plain.messages] in [b["messages"] for b in server.bodies]
    assert all(b["response_format"]["type"] == "json_schema"
               for b in server.bodies if b["messages"] == parts)


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(JudgeError, match=ENV):
        JudgeClient(JudgeConfig(model="m", api_key_env=ENV))
    with pytest.raises(RagevalError):
        JudgeClient(JudgeConfig(model="m", api_key_env="not a name"))
    client = JudgeClient(JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env=ENV))
    with pytest.raises(RagevalError):
        client.complete_many(reqs(1), concurrency=0)
    assert client.complete_many([]) == []


def test_a_judge_that_answered_earlier_in_the_run_is_not_dead(tmp_path: Path,
                                                              server: JudgeServer) -> None:
    """A later round (the next window of records) whose requests all fail leaves its records
    unscored: the judge answered the first round, so it is not taken for dead."""
    from rageval.api import evaluate
    from rageval.judge.llm.options import JudgeOptions, JudgeProgress

    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps({"id": f"q{i}", "answer": f"Answer {i}."}) + "\n"
                               for i in range(4)))

    def fail_once_the_first_window_is_answered(progress: JudgeProgress) -> None:
        if progress.done >= 2:
            server.always = "503"

    out = evaluate(records, ["judge:fluency"], bootstrap=5, window=2,
                   judge=JudgeOptions(model="judge-model", base_url=server.base_url,
                                      cache=str(tmp_path / "c.db"), max_retries=0,
                                      response_format="text",
                                      progress=fail_once_the_first_window_is_answered))
    summary = out.summary["judge:fluency"]
    assert (summary.n, summary.unscored) == (2, 2)
    assert all(r.errors["judge:fluency"].startswith("judge request failed: HTTP 503")
               for r in out.records[2:])
