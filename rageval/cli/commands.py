"""Implementations of the CLI subcommands (argument parsing lives in :mod:`rageval.cli`)."""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rageval.api import evaluate
from rageval.cli.gate_step import plan_gate
from rageval.cli.input_step import input_spec
from rageval.cli.mlflow_step import log_step, mlflow_target
from rageval.cli.otel_step import events_step, otel_target
from rageval.cli.phoenix_step import annotate_step, check_annotate
from rageval.cli.progress import progress_bars
from rageval.cli.report_command import write_run_report
from rageval.cli.secrets import run_masker
from rageval.compare.command_output import console_for
from rageval.core.errors import UsageError
from rageval.core.files import creatable
from rageval.core.outputs.text import terminal, terminal_lines
from rageval.core.results import count_of
from rageval.core.results.conversations import CONVERSATIONS_FILE
from rageval.inputs.spec import TRACE_KINDS
from rageval.report.tables import metrics_table, named_metrics_table, print_summary

if TYPE_CHECKING:
    from rich.console import Console

    from rageval.core.outputs.masking import Masker
    from rageval.core.results import Results
    from rageval.gate import GateReport
    from rageval.inputs.spec import InputSpec
    from rageval.judge.llm.options import JudgeOptions


def _check_out_dir(path: str) -> bool:
    """Make sure results can be written before spending time scoring (creating nothing: a
    run that fails on its input leaves no directory behind); whether a run is there already
    (this one replaces it)."""
    problem = creatable(path)
    if problem is not None:
        raise UsageError(f"--out {path}: cannot write the results there: {problem}")
    return any((Path(path) / name).exists() for name in ("summary.json", "records.jsonl"))


def _check_outputs(args: argparse.Namespace) -> bool:
    """Every place the run will write, checked before anything is scored; whether ``--out``
    holds a run already (it is replaced)."""
    replaced = _check_out_dir(args.out) if args.out else False
    if getattr(args, "report", None) and not args.out:
        raise UsageError("--report writes DIR/report.html: give the run an --out DIR")
    taken = _run_paths(args.out, bool(getattr(args, "report", None)))
    for flag, path in (("--junit", args.junit), ("--markdown", args.markdown),
                       ("--otel-events", getattr(args, "otel_events", None))):
        if not path:
            continue
        if (problem := _file_problem(path, args.out)) is not None:
            raise UsageError(f"{flag} {path}: cannot write there: {problem}")
        place = Path(os.path.realpath(path))
        if place in taken:
            raise UsageError(f"{flag} {path}: that is {taken[place]}, which the run writes "
                             "too: give it a path of its own")
        taken[place] = f"the path of {flag}"
    return replaced


def _run_paths(out: str | None, report: bool) -> dict[Path, str]:
    """The paths the run's own files take (resolved: links followed), each with what it is:
    ``--out`` itself and every file the run writes there."""
    if not out:
        return {}
    from rageval.core.outputs.run_directory import RUN_FILES

    directory = Path(os.path.realpath(out))
    names = (*RUN_FILES, *(("report.html",) if report else ()))
    return {directory: "the run's --out directory",
            **{directory / name: f"the run's {name} in --out {out}" for name in names}}


def _file_problem(path: str, out: str | None) -> str | None:
    """Why a file could not be written at ``path`` (a phrase naming the culprit), or None.
    Nothing is created: the file is written after the run, so its folder must exist now, or
    be one the run makes (``--out`` and the folders above it)."""
    target = Path(path).absolute()
    if target.is_dir():
        return f"{target} is a directory"
    made = set() if out is None else {Path(out).absolute(), *Path(out).absolute().parents}
    if not target.parent.exists() and target.parent not in made:
        return f"{target.parent} does not exist"
    return creatable(next(p for p in (target.parent, *target.parents) if p.exists()))


def _judge_options(args: argparse.Namespace) -> JudgeOptions | None:
    """The judge configuration from the score flags; None when no judge metric is asked for."""
    from rageval.core.registry import parse_name  # a malformed name gets a suggestion

    names = [parse_name(m) for m in args.metrics]
    judged = any(name.namespace == "judge" for name in names)
    # claims:, nuggets:, citations: need a model only when records do not bring every verdict
    # (their checks say so before any work).
    claim_level = any(name.namespace in ("claims", "nuggets", "citations") for name in names)
    pairwise = any(name.base.lower() == "judge:pairwise" for name in names)
    if args.judge_against is not None and not pairwise:
        raise UsageError("--judge-against gives the other system's answers to judge:pairwise; "
                         "add -m judge:pairwise or leave it out")
    if pairwise and args.judge_against is None:
        raise UsageError("judge:pairwise compares this run's answers with another system's: "
                         "give that system's records with --judge-against FILE")
    if not judged and not claim_level and args.judgments_from is None:
        return None
    from rageval.judge.llm.options import JudgeOptions

    options = JudgeOptions(**JudgeOptions.given(vars(args)))
    model = options.model or next((m["model"] for m in options.panel if "model" in m), None)
    if not model and (judged or args.judgments_from is not None):
        raise UsageError(
            "judge metrics and --judgments-from judge need --judge-model (offline replay too: "
            "the model is part of the cache key)"
        )
    options = replace(options, model=model or None)
    if options.model:  # without one, the claim-level checks say whether a model is needed
        options.check()
    return options


def run_score(args: argparse.Namespace, out: TextIO) -> int:
    if not args.metrics:
        raise UsageError("no metrics requested: -m METRIC (e.g. -m ndcg@10), repeatable, or "
                         "metrics = [...] in an evaluation file")
    inputs = input_spec(args)
    judge = _judge_options(args)
    if judge is not None and judge.batch_cancel:
        return _cancel_batches(judge, out)
    if getattr(args, "dry_run", False):
        from rageval.cli.dry_run import run_dry

        return run_dry(args, inputs, judge, out)
    gate = plan_gate(args, judge)
    check_annotate(args, inputs)
    mlflow = mlflow_target(args, judge)
    otel = otel_target(args)
    replaced = _check_outputs(args)
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    with progress_bars(bool(show)) as hooks:
        if judge is not None and hooks.judge is not None:
            judge = replace(judge, progress=hooks.judge)
        results = evaluate(
            inputs,
            args.metrics,
            qrels=args.qrels,
            trec_convention=args.trec_convention,
            seed=args.seed,
            bootstrap=args.bootstrap,
            ci=args.ci,
            batch_size=args.batch_size,
            progress=hooks.scoring,
            load_progress=hooks.loading,
            steps=hooks.steps,
            embedding_cache=args.embedding_cache,
            judge=judge,
            judgments_from=args.judgments_from,
            human=args.human,
            human_labels=args.human_labels,
            allow_unknown_labels=args.allow_unknown_labels,
            format=args.format,
            max_line_bytes=args.max_line_bytes,
            out=args.out,
            window=args.window,
            turn_thresholds=_turn_thresholds(args.turn_thresholds),
            engine=args.engine,
            ray_address=args.ray_address,
            ray_workers=args.ray_workers,
        )
    rewrite = False
    if getattr(args, "eval_file", None) is not None:  # rageval run: the file it ran
        results.manifest["eval_file"] = args.eval_file
        rewrite = True
    console = console_for(out)
    masker = run_masker(args)
    print_summary(results, console, components=args.components, signatures=args.signatures)
    if args.out:
        _write_run(results, args.out, console, rewrite, replaced,
                   report=bool(getattr(args, "report", None)))
    if args.progress is not False:  # say on stderr what the run did (stdout stays the table)
        from rageval.cli.progress import final_line

        print(terminal(masker(final_line(results))), file=sys.stderr)
    report = gate.apply(results, console, masker) if gate is not None else None
    name = args.out or _run_name(inputs)
    if args.junit:
        _write_junit(results, report, args.junit, name, console, masker)
    if args.markdown or _on_github(args):
        from rageval.cli.github_step import github_outputs

        github_outputs(results, report, name, args.markdown, _on_github(args), console,
                       masker)
    annotated = annotate_step(args, inputs, results, masker)  # after the outputs CI reads
    logged = log_step(mlflow, results, args.out, name, report, masker)
    sent = events_step(otel, inputs, results, args.out, masker)
    return _exit_status(results, report, annotated and logged and sent, masker)


def _exit_status(results: Results, report: GateReport | None, annotated: bool,
                 masker: Masker) -> int:
    """A scored run's exit status, the first that applies: capped (4), a metric that scored
    nothing (1, said on stderr), a failed gate (3), annotations, the MLflow run or the
    evaluation events refused (2), else 0."""
    capped = _capped(results)
    if capped is not None:
        print(terminal(f"rageval: {capped}"), file=sys.stderr)
        return CAPPED_EXIT
    empty = results.scored_nothing()
    if empty:
        print(terminal(masker(f"rageval: error: {empty[0]}")), file=sys.stderr)
        return 1
    if report is not None and not report.passed:
        from rageval.gate.model import GATE_FAILED_EXIT  # loaded only when a gate failed

        return GATE_FAILED_EXIT
    return 0 if annotated else 2


def _turn_thresholds(texts: list[str] | None) -> dict[str, float]:
    """``--turn-threshold METRIC=VALUE`` items (split on the last ``=``: metric names hold
    ``=`` themselves, ``p(rel=2)@5=0.3``)."""
    out: dict[str, float] = {}
    for text in texts or ():
        name, equals, value = text.rpartition("=")
        try:
            limit = float(value)
        except ValueError:
            limit = math.nan
        if not equals or not name.strip() or not math.isfinite(limit):
            raise UsageError(f"--turn-threshold {text!r}: expected METRIC=VALUE with a finite "
                             "number, e.g. 'ndcg@10=0.5'")
        out[name.strip()] = limit
    return out


def _run_name(inputs: InputSpec) -> str:
    """The run's name in JUnit and Markdown when it has no output directory."""
    if inputs.reader() in TRACE_KINDS:
        from rageval.inputs.traces import trace_source

        return trace_source(inputs)
    return str(inputs.records or inputs.run)


def _on_github(args: argparse.Namespace) -> bool:
    """--github, or by default whether the run is a GitHub Actions job's."""
    if args.github is not None:
        return bool(args.github)
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _write_junit(results: Results, report: GateReport | None, path: str, name: str,
                 console: Console, masker: Masker) -> None:
    """The run and its gate as JUnit XML at ``path``, written whole or not at all."""
    from rageval.core.files import atomic_write
    from rageval.gate.junit import junit_xml

    try:
        atomic_write(path, junit_xml(results, report, name, masker).encode("utf-8"))
    except OSError as error:
        raise UsageError(f"--junit {path}: cannot write: {error.strerror or error}") from None
    console.print(terminal(f"wrote {path} (JUnit XML)"), markup=False, highlight=False)


#: The exit status of a run that a judge cap stopped (--judge-max-requests, --judge-max-cost).
CAPPED_EXIT = 4


def _capped(results: Results) -> str | None:
    """What a judge cap kept from being sent, when one did."""
    from rageval.core.manifest import judge_sections

    for section in judge_sections(results.manifest).values():
        caps = section.get("caps") or {}
        if caps.get("not_sent"):
            return (f"the run reached its judge cap ({caps['reached']}): "
                    f"{count_of(caps['not_sent'], 'request')} not sent, their records left "
                    "unscored; every reply received is cached, so a rerun with a higher cap "
                    "asks only for the rest")
    return None


def _write_run(results: Results, out_dir: str, console: Console, rewrite: bool,
               replaced: bool, *, report: bool = False) -> None:
    """Say where the run was written and how to look at it (``rewrite``: the manifest
    changed since, so the summary is written again; ``replaced``: a run was there before;
    ``report``: write its HTML report there too)."""
    written = results.write(out_dir) if rewrite else Path(out_dir)
    note = ", replacing the run that was there" if replaced else ""
    files = [written / "records.jsonl", written / "summary.json"]
    if "conversations" in results.manifest:
        files.insert(1, written / CONVERSATIONS_FILE)
    console.print(terminal(f"wrote {', '.join(map(str, files[:-1]))} and {files[-1]}{note}"),
                  markup=False)
    page = written / "report.html"
    if report:
        write_run_report(results, out_dir, page)
        console.print(terminal(f"wrote {page}: open it in a browser"), markup=False,
                      highlight=False)
        return
    command = (f"rageval report {shlex.quote(str(written))} -o {shlex.quote(str(page))}, "
               f"then open {page} in a browser")
    if importlib.util.find_spec("matplotlib") is None:  # the report extra is not installed
        command = f"pip install 'rageval[report]', then {command}"
    console.print(terminal(f"HTML report: {command}"), markup=False, highlight=False)


def run_metrics_list(args: argparse.Namespace, out: TextIO) -> int:
    console = console_for(out)
    console.print(metrics_table())
    from rageval.judge.catalog import claim_level_table, rubrics_table

    console.print(rubrics_table(args.prompts_dir))
    console.print(claim_level_table())
    from rageval.tools.metric import KINDS, ToolCallMetric

    console.print(named_metrics_table(
        "tool-call metrics (tools:, docs/conversations.md)",
        [(f"tools:{kind}", ToolCallMetric, summary) for kind, summary in KINDS.items()]))
    return 0


def run_fuse(args: argparse.Namespace, out: TextIO) -> int:
    from rageval.retrieval.fusion import reciprocal_rank_fusion
    from rageval.retrieval.trec import read_run, write_run

    if len(args.runs) < 2:
        raise UsageError("fuse needs at least two runs")
    if args.depth is not None and args.depth < 1:
        raise UsageError(f"--depth must be at least 1, got {args.depth}")
    fused = reciprocal_rank_fusion(
        [read_run(path).frame for path in args.runs], k=args.k, depth=args.depth,
        runid=args.runid, names=args.runs,
    )
    write_run(out, fused, runid=args.runid)
    return 0


def _cancel_batches(judge: JudgeOptions, out: TextIO) -> int:
    """``--judge-batch-cancel``: cancel the judge's recorded batches and forget them."""
    from rageval.judge.llm.batch.run import cancel_recorded

    cancelled = cancel_recorded(judge)
    for batch_id, status in cancelled:
        print(terminal(f"batch {batch_id}: {status}"), file=out)
    if not cancelled:
        print(terminal(f"no batch is recorded beside {judge.cache_path} for {judge.model} at "
                       f"{judge.endpoint}: nothing to cancel"), file=out)
    return 0


def run_cache(args: argparse.Namespace, out: TextIO) -> int:
    import json

    from rageval.judge.llm.cache.store import JudgeCache
    from rageval.judge.llm.options import DEFAULT_CACHE

    if args.cache_command is None:
        raise UsageError("cache needs an action: stats, export or import")
    path = args.cache if args.cache is not None else DEFAULT_CACHE
    if args.cache_command != "import" and not Path(path).exists():
        raise UsageError(f"--cache {path}: no such judge cache")
    with JudgeCache(path) as cache:
        if args.cache_command == "stats":
            stats = {"path": str(path), **cache.stats()}
            out.write(json.dumps(stats, indent=2) + "\n")
        elif args.cache_command == "export":
            count = cache.export_jsonl(out if args.file is None else args.file)
            print(terminal(f"exported {count} entries from {path}"), file=sys.stderr)
        elif args.batch_input is not None or _is_batch_output(args.file):
            from rageval.judge.llm.batch.offline import import_batch_output

            if args.batch_input is None:
                raise UsageError(f"{args.file} is a batch's output: give --batch-input, the "
                                 "batch file rageval wrote, to match its lines to requests")
            counts = import_batch_output(cache, args.file, args.batch_input)
            print(terminal(f"read {counts['read']} batch lines, added {counts['added']} "
                           f"replies to {path} ({counts['failed']} lines without a reply)"),
                  file=out)
        else:
            counts = cache.import_jsonl(args.file)
            print(terminal(f"read {counts['read']} entries, added {counts['added']} to {path}"),
                  file=out)
    return 0


def _is_batch_output(path: str) -> bool:
    from rageval.judge.llm.batch.offline import is_batch_output

    return is_batch_output(path)


def run_annotate(args: argparse.Namespace, out: TextIO) -> int:
    """``rageval annotate``: serve the labelling page until Ctrl-C (or SIGTERM)."""
    from rageval.annotate.command import annotate_command

    return annotate_command(args, out)


def run_local_judge(args: argparse.Namespace, out: TextIO) -> int:
    """``rageval local-judge``: serve a GGUF model until Ctrl-C (or SIGTERM)."""
    import signal

    from rageval.judge.local import LocalJudge

    judge = LocalJudge(args.model, name=args.name, host=args.host, port=args.port,
                       context=args.ctx_size, threads=args.threads, log=args.log,
                       engine=args.engine, llama_server=args.llama_server,
                       prompt_cache=args.prompt_cache)

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        print(f"starting the local judge: {judge.gguf.name} on {judge.engine} "
              f"({judge.threads} threads, "
              f"context {judge.context})", file=out, flush=True)
        with judge:
            print(f"local judge ready: --judge-base-url {judge.base_url} "
                  f"--judge-model {judge.name}", file=out)
            print(f"(server log: {judge.log_path}; Ctrl-C stops it)", file=out, flush=True)
            status = judge.wait()
            # Said in words (the signal's name and likely cause), with the log's last lines.
            # The log is the server's own text: made safe for a terminal and a CI log.
            print(terminal_lines(run_masker(args)(f"rageval: error: {judge.ended(status)}")),
                  file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("local judge stopped", file=out, flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
