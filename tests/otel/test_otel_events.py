"""``rageval score --otel-events FILE``: each value of a run as one ``gen_ai.evaluation.result``
event on the span its record came from, read back with the OpenTelemetry SDK's decoder; texts
that are data stay data; records not read from traces; the file whole or absent; the missing
extra; the option in an evaluation file."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path

import pytest
from judge_server import TEST_KEY, TEST_KEY_ENV, JudgeServer
from otel_read import Event, file_events, trace_roots

from rageval.cli import main
from rageval.core.results import Results

pytest.importorskip("opentelemetry.exporter.otlp.json.common",
                    reason="the evaluation events need the otel extra")

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "fixtures" / "traces"
DEMO = ROOT / "fixtures" / "demo"
METRICS = ["ndcg@3", "rouge1", "judge:faithfulness"]
TRACE_INPUT = [str(TRACES / "spans.otlp.jsonl"), "--input-format", "openinference",
               "--map", "id=metadata.qid", "--references", str(TRACES / "references.jsonl")]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def judge_flags(judge: JudgeServer, cache: Path) -> list[str]:
    return ["--judge-model", "judge-model", "--judge-base-url", judge.base_url,
            "--judge-api-key-env", TEST_KEY_ENV, "--cache", str(cache)]


def _by_key(events: list[Event]) -> dict[tuple[str, str], Event]:
    keyed = {(e.attributes["rageval.record.id"], e.attributes["gen_ai.evaluation.name"]): e
             for e in events}
    assert len(keyed) == len(events), "two events for one record and metric"
    return keyed


def test_each_value_is_one_event_on_the_span_its_record_came_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events_file, out = tmp_path / "events.jsonl", tmp_path / "run"
    with JudgeServer() as judge:
        code, _, err = run(["score", *TRACE_INPUT, *[a for m in METRICS for a in ("-m", m)],
                            *judge_flags(judge, tmp_path / "cache.sqlite"), "--no-progress",
                            "--out", str(out), "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    results = Results.load(out)
    events = file_events(events_file)
    assert "wrote 24 evaluation events to" in err and "24 on their records' spans" in err
    # One event per record and metric of the table, each on its record's root span.
    roots = trace_roots(TRACES / "spans.otlp.jsonl")
    keyed = _by_key(events)
    assert set(keyed) == {(r.id, m) for r in results.records for m in METRICS}
    for (record_id, metric), event in keyed.items():
        assert event.name == "gen_ai.evaluation.result"
        assert (event.trace_id, event.span_id) == roots[record_id]
        assert event.resource["service.name"] == "rageval"
        assert event.attributes["rageval.signature"] == \
            results.summary[metric].short_signature
    unscored = 0
    for row in results.records:
        for metric in METRICS:
            attributes = keyed[(row.id, metric)].attributes
            value = row.scores[metric]
            if value is None or math.isnan(value):  # q5 retrieved nothing: no faithfulness
                unscored += 1
                assert attributes["gen_ai.evaluation.score.label"] == "unscored"
                assert "gen_ai.evaluation.score.value" not in attributes
                assert attributes["gen_ai.evaluation.explanation"] == row.errors[metric]
                continue
            assert attributes["gen_ai.evaluation.score.value"] == pytest.approx(value)
            assert "gen_ai.evaluation.score.label" not in attributes
            reasoning = row.details.get(metric, {}).get("reasoning")
            assert attributes.get("gen_ai.evaluation.explanation") == reasoning
            assert (reasoning is not None) == (metric == "judge:faithfulness")
    assert unscored == 1


def test_an_unscored_value_is_labelled_unscored_with_its_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "a", "query": "q", "answer": "x", "reference": "x"})
                       + "\n" + json.dumps({"id": "b", "query": "q", "reference": "y"}) + "\n",
                       encoding="utf-8")
    events_file = tmp_path / "events.jsonl"
    code, _, err = run(["score", str(records), "-m", "rouge1", "--no-progress",
                        "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    keyed = _by_key(file_events(events_file))
    scored, unscored = keyed[("a", "rouge1")], keyed[("b", "rouge1")]
    assert scored.attributes["gen_ai.evaluation.score.value"] == 1.0
    assert unscored.attributes["gen_ai.evaluation.score.label"] == "unscored"
    assert "gen_ai.evaluation.score.value" not in unscored.attributes
    assert "answer" in unscored.attributes["gen_ai.evaluation.explanation"]


def test_records_not_read_from_traces_carry_their_ids_and_no_span(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events_file = tmp_path / "events.jsonl"
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "ndcg@3", "-m", "rouge1",
                        "--no-progress", "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    events = file_events(events_file)
    ids = [json.loads(line)["id"] for line in
           (DEMO / "records.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert set(_by_key(events)) == {(i, m) for i in ids for m in ("ndcg@3", "rouge1")}
    assert all(e.trace_id == "" and e.span_id == "" for e in events)
    assert (f"{len(events)} without a span (records not read from traces, without trace_id "
            "and span_id)") in err


def test_records_of_a_file_that_name_their_spans_get_their_events_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A records file whose records carry their own valid trace_id and span_id: their events
    go on those spans; a record with ids that are not OpenTelemetry ids goes without one."""
    records = tmp_path / "records.jsonl"
    rows = [{"id": "a", "answer": "x y", "reference": "x y", "trace_id": "AB" * 16,
             "span_id": "cd" * 8},
            {"id": "b", "answer": "x", "reference": "x y", "trace_id": "0" * 32,
             "span_id": "cd" * 8},
            {"id": "c", "answer": "x", "reference": "y", "span_id": "ef" * 8}]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    events_file = tmp_path / "events.jsonl"
    code, _, err = run(["score", str(records), "-m", "rouge1", "--no-progress",
                        "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    keyed = _by_key(file_events(events_file))
    assert (keyed[("a", "rouge1")].trace_id, keyed[("a", "rouge1")].span_id) == (
        "ab" * 16, "cd" * 8)
    for spanless in ("b", "c"):
        assert (keyed[(spanless, "rouge1")].trace_id, keyed[(spanless, "rouge1")].span_id) == (
            "", "")
    assert "1 on their records' spans" in err and "2 without a span" in err


def test_hostile_texts_stay_data(tmp_path: Path, keyed_judge: JudgeServer,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A record id that looks like JSON, breaks lines and carries escapes, and judge reasoning
    holding the same, a lone surrogate and the judge's API key, come back as the same text
    (the surrogate as U+FFFD, the key masked), and the file stays one line of OTLP/JSON."""
    hostile = 'a"}]}\n{"resourceLogs":[\u2028\x1b[31m <x> & \\'
    records = tmp_path / "records.jsonl"
    lines = [{"id": hostile, "query": "Where?", "answer": "In Oslo.", "contexts": ["Oslo."]},
             {"id": "plain", "query": "When?", "answer": f"{hostile}\ud800 {TEST_KEY}",
              "contexts": ["Today."]}]
    records.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    events_file, out = tmp_path / "events.jsonl", tmp_path / "run"
    keyed_judge.always = "echo"  # its reasoning: the answer's text
    code, _, err = run(["score", str(records), "-m", "judge:faithfulness", "--no-progress",
                        *judge_flags(keyed_judge, tmp_path / "cache.sqlite"), "--out",
                        str(out), "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    text = events_file.read_text(encoding="utf-8")
    assert len(text.splitlines()) == 1 and TEST_KEY not in text
    keyed = _by_key(file_events(events_file))
    assert set(keyed) == {(hostile, "judge:faithfulness"), ("plain", "judge:faithfulness")}
    explanation = keyed[("plain", "judge:faithfulness")].attributes[
        "gen_ai.evaluation.explanation"]
    (row,) = [r for r in Results.load(out).records if r.id == "plain"]
    reasoning = row.details["judge:faithfulness"]["reasoning"]
    assert explanation == reasoning.replace("\ud800", "\ufffd").replace(TEST_KEY, "***")
    assert "resourceLogs" in explanation and "***" in explanation and "\ufffd" in explanation


def test_the_file_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    from rageval.otel import EvaluationEvent, write_events
    from rageval.otel.export import BATCH

    path = tmp_path / "events.jsonl"
    path.write_text("an earlier run's events\n", encoding="utf-8")

    def events():  # type: ignore[no-untyped-def]
        for n in range(BATCH + 3):
            yield EvaluationEvent({"gen_ai.evaluation.name": "m", "rageval.record.id": str(n)},
                                  None)
        raise KeyboardInterrupt  # the run stopped halfway through the file

    with pytest.raises(KeyboardInterrupt):
        write_events(path, events())
    assert path.read_text(encoding="utf-8") == "an earlier run's events\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]  # no temporary left


def test_without_the_otel_extra_the_error_names_it_before_scoring(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.json.common", None)
    code, out, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                          "--out", str(tmp_path / "o"), "--otel-events",
                          str(tmp_path / "events.jsonl")], capsys)
    assert code == 2
    assert ("needs the 'opentelemetry-exporter-otlp-json-common' package: pip install "
            "'rageval[otel]'") in err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "o").exists() and not (tmp_path / "events.jsonl").exists()


def test_a_folder_that_does_not_exist_is_refused_before_scoring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing" / "events.jsonl"
    code, out, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                          "--otel-events", str(target)], capsys)
    assert code == 2 and f"--otel-events {target}: cannot write there" in err and out == ""


def test_an_evaluation_file_names_the_events_file_under_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eval.toml").write_text(
        f'metrics = ["rouge1"]\n[inputs]\nrecords = "{DEMO / "records.jsonl"}"\n'
        '[output]\notel_events = "events.jsonl"\n', encoding="utf-8")
    code, _, err = run(["run", "eval.toml", "--no-progress"], capsys)
    assert code == 0, err
    assert {e.attributes["gen_ai.evaluation.name"] for e in
            file_events(tmp_path / "events.jsonl")} == {"rouge1"}


def test_the_turns_of_a_session_go_to_their_own_spans(tmp_path: Path) -> None:
    """With --trace-sessions each turn's events go to its own trace's root span and name the
    conversation (gen_ai.conversation.id)."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from rageval.api import evaluate
    from rageval.inputs import InputSpec
    from rageval.otel import evaluation_events, record_spans
    from rageval.otel.events import table_metrics

    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    roots = {}
    for question in ("Can I get a refund?", "It has been 40 days."):
        tracer = provider.get_tracer("tests")
        with tracer.start_as_current_span("chat", attributes={
                "openinference.span.kind": "CHAIN", "input.value": question,
                "session.id": "s1"}) as span:
            with tracer.start_as_current_span("llm", attributes={
                    "openinference.span.kind": "LLM",
                    "llm.output_messages.0.message.content": "Yes."}):
                pass
            context = span.get_span_context()
            roots[question] = (f"{context.trace_id:032x}", f"{context.span_id:016x}")
    provider.shutdown()
    spec = InputSpec(records=str(path), kind="openinference", sessions=True,
                     field_map=(("reference", "input.value"),))
    results = evaluate(spec, ["rouge1"], bootstrap=10)
    events = list(evaluation_events(results.records, record_spans(spec), table_metrics(results)))
    turns = [e for e in events if e.span is not None]
    assert len(turns) == 2 and all(e.attributes["gen_ai.conversation.id"] == "s1"
                                   for e in turns)
    assert {(e.span.trace_id, e.span.span_id) for e in turns if e.span} == set(roots.values())
    assert all(e.attributes["rageval.record.id"] == f"s1#{e.span.trace_id}"
               for e in turns if e.span)


def _write_traces(path: Path, session: str | None = None) -> dict[str, tuple[str, list[str]]]:
    """Two traces, each a CHAIN root with two LLM spans under it, as the SDK's OTLP/JSON file
    exporter writes them (in ``session`` when given); question -> (trace id, LLM span ids)."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("tests")
    traces = {}
    for question in ("Can I get a refund?", "It has been 40 days."):
        root = {"openinference.span.kind": "CHAIN", "input.value": question}
        if session is not None:
            root["session.id"] = session
        with tracer.start_as_current_span("chat", attributes=root) as span:
            llms = []
            for answer in ("Yes.", "Within 30 days."):
                with tracer.start_as_current_span("llm", attributes={
                        "openinference.span.kind": "LLM",
                        "llm.output_messages.0.message.content": answer}) as llm:
                    llms.append(f"{llm.get_span_context().span_id:016x}")
            traces[question] = (f"{span.get_span_context().trace_id:032x}", llms)
    provider.shutdown()
    return traces


def test_under_trace_unit_llm_each_event_is_on_its_llm_span(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans_file, events_file = tmp_path / "spans.jsonl", tmp_path / "events.jsonl"
    traces = _write_traces(spans_file)
    code, _, err = run(["score", str(spans_file), "--input-format", "openinference",
                        "--trace-unit", "llm", "--map",
                        "reference=llm.output_messages.0.message.content", "-m", "rouge1",
                        "--no-progress", "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    events = file_events(events_file)
    expected = {(trace_id, span_id) for trace_id, llms in traces.values() for span_id in llms}
    assert {(e.trace_id, e.span_id) for e in events} == expected and len(events) == 4
    # A record of an LLM span is named by its span id, and scores its own answer.
    assert all(e.attributes["rageval.record.id"] == e.span_id for e in events)
    assert all(e.attributes["gen_ai.evaluation.score.value"] == 1.0 for e in events)
    assert "wrote 4 evaluation events" in err and "4 on their records' spans" in err
    assert "without a span" not in err


def test_a_sessions_whole_conversation_values_are_counted_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--trace-sessions: the turns' events on their traces' root spans, the conversation's own
    value on none, said as such on stderr (not as records not read from traces)."""
    spans_file, events_file = tmp_path / "spans.jsonl", tmp_path / "events.jsonl"
    traces = _write_traces(spans_file, session="s1")
    with JudgeServer() as judge:
        code, _, err = run(["score", str(spans_file), "--input-format", "openinference",
                            "--trace-sessions", "--map", "reference=input.value", "-m",
                            "rouge1", "-m", "judge:consistency",
                            *judge_flags(judge, tmp_path / "cache.sqlite"), "--no-progress",
                            "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    events = file_events(events_file)
    whole = [e for e in events if e.attributes["gen_ai.evaluation.name"] == "judge:consistency"]
    turns = [e for e in events if e.attributes["gen_ai.evaluation.name"] == "rouge1"]
    assert len(whole) == 1 and whole[0].trace_id == "" and whole[0].span_id == ""
    assert whole[0].attributes["gen_ai.conversation.id"] == "s1"
    assert {e.trace_id for e in turns} == {trace_id for trace_id, _ in traces.values()}
    assert (f"wrote {len(events)} evaluation events to {events_file} (OTLP/JSON): "
            f"{len(turns)} on their records' spans; 1 of whole conversations (no one span)"
            in err)
    assert "records not read from traces" not in err and "without a span" not in err


def test_trace_records_without_valid_span_ids_are_counted_as_such(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans_file, events_file = tmp_path / "spans.jsonl", tmp_path / "events.jsonl"
    traces = _write_traces(spans_file)
    zeroed, _ = traces["Can I get a refund?"]
    spans_file.write_text(spans_file.read_text(encoding="utf-8").replace(zeroed, "0" * 32),
                          encoding="utf-8")
    code, _, err = run(["score", str(spans_file), "--input-format", "openinference", "--map",
                        "reference=input.value", "-m", "rouge1", "--no-progress",
                        "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    events = file_events(events_file)
    assert sorted(e.trace_id for e in events) == sorted(["", traces["It has been 40 days."][0]])
    assert ("1 on their records' spans; 1 without a span (trace records without valid span "
            "ids)") in err


def test_the_events_name_the_conventions_schema(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The scope carries the schema URL of the pinned conventions, which the docs name too."""
    from rageval.otel.events import CONVENTIONS, SCHEMA_URL

    events_file = tmp_path / "events.jsonl"
    code, _, err = run(["score", str(DEMO / "records.jsonl"), "-m", "rouge1", "--no-progress",
                        "--otel-events", str(events_file)], capsys)
    assert code == 0, err
    for line in events_file.read_text(encoding="utf-8").splitlines():
        for resource_logs in json.loads(line)["resourceLogs"]:
            for scope_logs in resource_logs["scopeLogs"]:
                assert scope_logs["scope"]["name"] == "rageval"
                assert scope_logs["schemaUrl"] == SCHEMA_URL
    commit = CONVENTIONS.rpartition(" ")[2]
    assert len(commit) == 40 and int(commit, 16) >= 0
    docs = (ROOT / "docs" / "otel-events.md").read_text(encoding="utf-8")
    assert commit in docs and SCHEMA_URL in docs and "v0.1.0" not in docs


def test_a_failed_evaluation_has_an_error_type_and_no_answer_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A judge reply without a verdict is an error of the evaluation (error.type); a record
    without an answer had nothing to evaluate: unscored, with its reason, and no error.type."""
    records = tmp_path / "records.jsonl"
    records.write_text(
        json.dumps({"id": "a", "query": "Where?", "answer": "In Oslo.", "contexts": ["Oslo."]})
        + "\n" + json.dumps({"id": "b", "query": "When?", "contexts": ["Today."]}) + "\n",
        encoding="utf-8")
    events_file = tmp_path / "events.jsonl"
    with JudgeServer() as judge:
        judge.always = "prose"  # a reply without a score
        run(["score", str(records), "-m", "judge:faithfulness", "--no-progress",
             *judge_flags(judge, tmp_path / "cache.sqlite"), "--otel-events", str(events_file)],
            capsys)
    keyed = _by_key(file_events(events_file))
    failed = keyed[("a", "judge:faithfulness")].attributes
    assert failed["error.type"] == "judge_reply_unusable"
    assert failed["gen_ai.evaluation.score.label"] == "unscored"
    assert failed["gen_ai.evaluation.explanation"].startswith("judge reply not usable")
    empty = keyed[("b", "judge:faithfulness")].attributes
    assert empty["gen_ai.evaluation.score.label"] == "unscored"
    assert "answer" in empty["gen_ai.evaluation.explanation"] and "error.type" not in empty


def test_each_judge_failure_has_its_error_type() -> None:
    from rageval.core.results import RecordResult
    from rageval.judge.llm.replies import NOT_CACHED
    from rageval.otel import evaluation_events

    reasons = {"judge request failed: HTTP 500": "judge_request_failed",
               "extracting the claims of the answer: judge request failed: timed out":
                   "judge_request_failed",
               "not asked: the run reached its judge cap (--judge-max-requests 10)":
                   "judge_cap_reached",
               NOT_CACHED: "judge_reply_not_cached",
               "no contexts (the record has no 'contexts')": None}
    rows = [RecordResult(str(n), {"m": None}, {"m": reason}, {})
            for n, reason in enumerate(reasons)]
    events = list(evaluation_events(rows, {}, {"m": ""}))
    assert [e.attributes.get("error.type") for e in events] == list(reasons.values())


def test_ids_are_masked_only_by_credentials_of_the_run() -> None:
    """A short secret (a URL's org=acme) leaves the join keys whole; a key still masks them,
    and the texts are masked by every secret."""
    from rageval.core.outputs.masking import Masker
    from rageval.core.results import RecordResult
    from rageval.otel import evaluation_events

    key = "sk-live-0123456789abcdef"
    masker = Masker.of(["acme", key])
    rows = [RecordResult("acme-q1", {"m": None}, {"m": "acme refused"}, {},
                         conversation="acme-c1", turn=1),
            RecordResult(f"leak-{key}", {"m": 1.0}, {}, {})]
    first, second = (e.attributes for e in evaluation_events(rows, {}, {"m": ""}, masker))
    assert first["rageval.record.id"] == "acme-q1"
    assert first["gen_ai.conversation.id"] == "acme-c1"
    assert first["gen_ai.evaluation.explanation"] == "*** refused"
    assert second["rageval.record.id"] == "leak-***"


def test_the_trace_readers_named_are_the_loaders_readers_of_traces() -> None:
    """Only a reader that exists and reads traces routes events to spans."""
    from rageval.inputs import load
    from rageval.inputs.spec import TRACE_KINDS

    trace_readers = {kind for kind, reader in load._READERS.items() if reader is load._traces}
    assert trace_readers == set(TRACE_KINDS)
