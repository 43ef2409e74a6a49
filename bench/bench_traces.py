"""Traces in: reading an OTLP/JSON export against reading the same records as JSONL, alone and
end to end through ``rageval score``.

    python bench/bench_traces.py [--traces 100000] [--repeats 3] [--seed 0]
        [--metrics ndcg@10 recall@5 rouge1 rougeL] [--data-dir bench/data] [--json out.json]

The records are bench_stream.py's (5 contexts, an answer, a reference, graded judgments). Each
becomes a trace as an instrumented pipeline writes it, made with opentelemetry-sdk and written
by the OTLP/JSON file exporter (512 spans per line): a CHAIN root holding the query and the
record's id in its metadata, a RETRIEVER span with the 5 documents (id, content, score) and an
LLM span whose output message is the answer. References and judgments go to a references file
joined by ``--map id=metadata.qid --references``, as a team's would. Both files are written
once to ``--data-dir`` (git-ignored) and reused.

Two measurements, each in its own process, medians over ``--repeats`` (wall time, CPU time
and peak RSS from ``os.wait4``; on a busy machine the CPU time is the steadier measure of the
work), the JSONL path as the anchor:

- **read**: every window of records read, validated and joined with its judgments as a run
  reads them (``RunInputs.windows``), nothing scored, in spans per second and records per
  second;
- **score**: ``rageval score ... --out DIR`` with the metrics given, in records per second.

Both paths must give the same records.jsonl: the benchmark checks that once before timing.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_proc import rageval_command, run_process, run_usage
from bench_stream import records_file

METRICS = ["ndcg@10", "recall@5", "rouge1", "rougeL"]
# Both read as a run reads its records (RunInputs: windows, the judgments joined), no scoring.
_READ_TRACES = (
    "import sys; from rageval.inputs import InputSpec; from rageval.inputs.run import "
    "RunInputs; spec = InputSpec(records=sys.argv[1], kind='openinference', "
    "field_map=(('id', 'metadata.qid'),), references=sys.argv[2]); "
    "print(sum(len(w) for w in RunInputs(spec).windows()))")
_READ_JSONL = (
    "import sys; from rageval.inputs.run import RunInputs; "
    "print(sum(len(w) for w in RunInputs(sys.argv[1]).windows()))")


def trace_files(records: Path, data_dir: Path) -> tuple[Path, Path, int]:
    """The traces and references files of ``records`` (written first if missing), and the
    number of spans."""
    traces = data_dir / f"{records.stem}.otlp.jsonl"
    references = data_dir / f"{records.stem}.references.jsonl"
    count = data_dir / f"{records.stem}.spans"
    if traces.exists() and references.exists() and count.exists():
        return traces, references, int(count.read_text())
    start = time.perf_counter()
    spans = _write_traces(records, traces.with_suffix(".partial"))
    traces.with_suffix(".partial").replace(traces)
    with records.open(encoding="utf-8") as src, references.open("w", encoding="utf-8") as out:
        for line in src:
            row = json.loads(line)
            out.write(json.dumps({"id": row["id"], "reference": row["reference"],
                                  "judgments": row["judgments"]}) + "\n")
    count.write_text(str(spans))
    print(f"wrote {traces} ({traces.stat().st_size / 2**20:.0f} MiB, {spans:,} spans) in "
          f"{time.perf_counter() - start:.0f} s")
    return traces, references, spans


def _write_traces(records: Path, path: Path) -> int:
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Batches(SpanExporter):  # type: ignore[misc]
        """512 spans per export, in the caller's thread: a batch processor's queue drops
        spans when a loop makes them faster than its thread writes them."""

        def __init__(self) -> None:
            self.inner, self.held = FileSpanExporter(path), []

        def export(self, spans: Any) -> Any:
            self.held.extend(spans)
            if len(self.held) >= 512:
                self.inner.export(self.held)
                self.held = []
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            if self.held:
                self.inner.export(self.held)
            self.inner.shutdown()

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Batches()))
    tracer = provider.get_tracer("bench")
    spans = 0
    with records.open(encoding="utf-8") as src:
        for line in src:
            row = json.loads(line)
            with tracer.start_as_current_span("rag", attributes={
                    "openinference.span.kind": "CHAIN", "input.value": row["query"],
                    "metadata": json.dumps({"qid": row["id"]})}):
                attributes: dict[str, Any] = {"openinference.span.kind": "RETRIEVER",
                                              "input.value": row["query"]}
                for i, context in enumerate(row["contexts"]):
                    prefix = f"retrieval.documents.{i}.document"
                    attributes[f"{prefix}.id"] = context["id"]
                    attributes[f"{prefix}.content"] = context["text"]
                    attributes[f"{prefix}.score"] = float(len(row["contexts"]) - i)
                with tracer.start_as_current_span("retrieve", attributes=attributes):
                    pass
                with tracer.start_as_current_span("llm", attributes={
                        "openinference.span.kind": "LLM",
                        "llm.input_messages.0.message.role": "user",
                        "llm.input_messages.0.message.content": row["query"],
                        "llm.output_messages.0.message.role": "assistant",
                        "llm.output_messages.0.message.content": row["answer"]}):
                    pass
            spans += 3
    provider.shutdown()
    return spans


def _native(records: Path, data_dir: Path) -> Path:
    """The records with the retriever's scores the traces carry: the same data both ways."""
    path = data_dir / f"{records.stem}.scored.jsonl"
    if path.exists():
        return path
    with records.open(encoding="utf-8") as src, path.open("w", encoding="utf-8") as out:
        for line in src:
            row = json.loads(line)
            n = len(row["contexts"])
            row["contexts"] = [dict(c, score=float(n - i)) for i, c in enumerate(row["contexts"])]
            out.write(json.dumps(row) + "\n")
    return path


def score_command(traces: Path | None, source: Path, references: Path | None,
                  metrics: list[str], out: Path) -> list[str]:
    cmd = [*rageval_command(), "score", str(source.resolve())]
    if traces is not None and references is not None:
        cmd += ["--input-format", "openinference", "--map", "id=metadata.qid",
                "--references", str(references.resolve())]
    return [*cmd, *(a for m in metrics for a in ("-m", m)), "--out", str(out), "--no-progress"]


def timed(cmd: list[str], repeats: int) -> dict[str, float]:
    runs = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            final = [str(Path(tmp) / "out") if part == "{out}" else part for part in cmd]
            wall, usage = run_usage(final, tmp)
            runs.append((wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss))
    return {"wall_s": statistics.median(w for w, _, _ in runs),
            "cpu_s": statistics.median(c for _, c, _ in runs),
            "rss_mib": statistics.median(r for _, _, r in runs) / 1024,
            "walls": [round(w, 3) for w, _, _ in runs],
            "cpus": [round(c, 3) for _, c, _ in runs]}


def check_same(traces: Path, native: Path, references: Path, metrics: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd in (("traces", score_command(traces, traces, references, metrics,
                                                   Path(tmp) / "traces")),
                          ("jsonl", score_command(None, native, None, metrics,
                                                  Path(tmp) / "jsonl"))):
            run_process(cmd, tmp)
            print(f"checked: {name} scored")
        if not filecmp.cmp(Path(tmp) / "traces" / "records.jsonl",
                           Path(tmp) / "jsonl" / "records.jsonl", shallow=False):
            sys.exit("bench: the traces and the JSONL records gave different records.jsonl")
    print("checked: identical records.jsonl both ways")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics", nargs="+", default=METRICS)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    records = records_file(args.data_dir, args.traces, args.seed)
    traces, references, spans = trace_files(records, args.data_dir)
    native = _native(records, args.data_dir)
    check_same(traces, native, references, args.metrics)
    python = sys.executable
    rows = {
        "read traces": timed([python, "-c", _READ_TRACES, str(traces), str(references)],
                             args.repeats),
        "read JSONL": timed([python, "-c", _READ_JSONL, str(native)], args.repeats),
        "score traces": timed(score_command(traces, traces, references, args.metrics,
                                            Path("{out}")), args.repeats),
        "score JSONL": timed(score_command(None, native, None, args.metrics, Path("{out}")),
                             args.repeats),
    }
    n = args.traces
    print(f"\n{n:,} traces ({spans:,} spans, {traces.stat().st_size / 2**20:.0f} MiB) against "
          f"the same records as JSONL ({native.stat().st_size / 2**20:.0f} MiB); metrics "
          f"{' '.join(args.metrics)}; medians of {args.repeats}")
    print(f"{'path':<14} {'wall s':>8} {'CPU s':>8} {'spans/s':>10} {'records/s':>10} "
          f"{'peak RSS':>10}")
    for name, row in rows.items():
        per_span = f"{spans / row['wall_s']:,.0f}" if "traces" in name else "-"
        print(f"{name:<14} {row['wall_s']:>8.2f} {row['cpu_s']:>8.2f} {per_span:>10} "
              f"{n / row['wall_s']:>10,.0f} {row['rss_mib']:>7.0f} MiB")
    for what in ("read", "score"):
        traces_row, jsonl_row = rows[f"{what} traces"], rows[f"{what} JSONL"]
        print(f"{what}: traces take {traces_row['wall_s'] / jsonl_row['wall_s']:.2f}x the JSONL "
              f"path's wall time, {traces_row['cpu_s'] / jsonl_row['cpu_s']:.2f}x its CPU time")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"traces": n, "spans": spans, "metrics": args.metrics,
                                         "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
