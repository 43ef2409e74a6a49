"""The options of a scoring run, shared by ``rageval score`` and ``rageval run``.

``score`` takes them with their defaults. ``run`` reads an evaluation file and takes the same
options as overrides: its parser leaves out every option not given (``argparse.SUPPRESS``), so
:func:`merged` can lay the flags given over the file's fields over :data:`DEFAULTS`.
"""

from __future__ import annotations

import argparse
from typing import Any

from rageval.inputs.spec import INPUT_KINDS
from rageval.judge.llm.formats import MODES

# Every option whose default is not None/False (argparse's own) is listed here, not in
# add_argument, so that `run` can tell a flag given from a default.
DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "bootstrap": 1000,
    "batch_size": 1000,
    "ci": "records",
    "engine": "local",
    "judge_api_key_env": "OPENAI_API_KEY",
    "judge_concurrency": 16,
    "judge_response_format": "auto",
    "judge_timeout": 120.0,
    "judge_max_retries": 5,
    "judge_temperature": 0.0,
    "judge_samples": 1,
    "input_format": "records",
    "split": "test",
    "trace_unit": "trace",
    "trace_sessions": False,
    "phoenix_annotate": False,
    "allow_data_change": False,
    "gate_on": "mean",
    # Switches are --x/--no-x (so that `run` can turn off what an evaluation file turns on).
    "trec_convention": False,
    "components": False,
    "signatures": False,
    "offline": False,
    "allow_missing": False,
    "refresh": False,
    "judge_logprobs": False,
    "judge_any_served_model": False,
    "dry_run": False,
    "judge_panel_rule": "mean",
}


def score_defaults() -> dict[str, Any]:
    """Every option of a scoring run at its default (what ``rageval score`` starts from)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_score_options(parser)
    parser.set_defaults(**DEFAULTS)
    return vars(parser.parse_args([]))


def add_score_options(p: argparse.ArgumentParser) -> None:
    """Every option of a scoring run (the records file itself is the caller's)."""
    p.add_argument("-m", "--metric", dest="metrics", action="append", metavar="METRIC",
                   help="metric name, repeatable: -m ndcg@10 -m 'p(rel=2)@5'")
    p.add_argument("--qrels", help="TREC qrels file giving the records' judgments")
    p.add_argument("--out", help="output directory for records.jsonl and summary.json")
    p.add_argument("--format", choices=("jsonl", "json", "csv", "parquet", "arrow"),
                   help="records format (default: from the file extension)")
    p.add_argument("--trec-convention", action=argparse.BooleanOptionalAction,
                   help="score queries without relevant judgments as 0, as trec_eval does, "
                   "instead of leaving them unscored")
    p.add_argument("--seed", type=int, help="bootstrap seed (default 0)")
    p.add_argument("--bootstrap", type=int, help="bootstrap resamples for the 95%% CI "
                   "(default 1000)")
    p.add_argument("--ci", choices=("records", "judge-noise", "poisson"),
                   help="how the 95%% CIs are drawn: records (default: the percentile "
                   "bootstrap of the records, in running sums with Poisson weights past "
                   "100,000 records), judge-noise: for a judge metric asked several times per "
                   "record (--judge-samples), the records and then each record's samples, so "
                   "that the CI holds the judge's own noise, or poisson: running sums with "
                   "Poisson weights from the first record")
    p.add_argument("--batch-size", type=int, help="records per scoring batch (default 1000)")
    p.add_argument("--engine", choices=("local", "ray"),
                   help="what scores the batches: this process (local, the default) or a Ray "
                   "cluster (ray; pip install 'rageval[ray]'), with the same values")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="the Ray cluster to use (default: a local one started for the run)")
    p.add_argument("--ray-workers", type=int, metavar="N",
                   help="Ray actors scoring batches (default: the cluster's CPUs, at most 8)")
    p.add_argument("--window", type=int, metavar="N",
                   help="records read and scored together from a records file (default "
                   "10000, on Ray 100000): memory holds one window; with --out each record's "
                   "results are written as they finish")
    p.add_argument("--max-line-bytes", type=int, metavar="N",
                   help="refuse a records line longer than N bytes (default 64 MiB): reading "
                   "one takes several times its size in memory")
    p.add_argument("--embedding-cache", metavar="DIR|none",
                   help="where BERTScore keeps token embeddings between runs (default: "
                   "$RAGEVAL_EMBEDDING_CACHE, $RAGEVAL_CACHE_DIR/bertscore or "
                   "~/.cache/rageval/bertscore); none: keep none")
    p.add_argument("--components", action=argparse.BooleanOptionalAction,
                   help="show every component (rouge2.precision, bleu.p1, ...) in the table, "
                   "not only headline values (the files always hold all of them)")
    p.add_argument("--signatures", action=argparse.BooleanOptionalAction,
                   help="show each value's full signature under the table (default: the short "
                   "form, once per configuration)")
    p.add_argument("--turn-threshold", dest="turn_thresholds", action="append",
                   metavar="METRIC=VALUE",
                   help="in conversations.jsonl, the first turn of each conversation whose "
                   "METRIC falls under VALUE (over it where lower is better), repeatable: "
                   "--turn-threshold ndcg@10=0.5")
    _input_options(p)
    _judge_options(p)
    _gate_options(p)
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="always show progress bars")
    bar.add_argument("--no-progress", dest="progress", action="store_false",
                     help="never show progress bars (default: on a terminal)")


def _input_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("inputs in other formats (see docs/inputs.md)")
    g.add_argument("--input-format", choices=INPUT_KINDS,
                   help="how the records file's columns are read: records (rageval's, the "
                   "default), ragas (question/contexts/answer/ground_truth columns, "
                   "HF datasets style), trec-rag (a TREC RAG 2024 generation run), "
                   "openinference (OpenTelemetry spans as OTLP/JSON: one record per trace)")
    g.add_argument("--map", dest="field_map", action="append", metavar="FIELD=COLUMN",
                   help="read rageval's FIELD from the file's COLUMN, repeatable: "
                   "--map query=question (for traces: a span attribute, --map id=metadata.qid)")
    g.add_argument("--phoenix", metavar="URL", help="read the traces of --project from this "
                   "Phoenix server (instead of a file); its API key from PHOENIX_API_KEY")
    g.add_argument("--project", metavar="NAME", help="the Phoenix project of --phoenix")
    g.add_argument("--phoenix-since", metavar="TIME", help="read the traces of --project with "
                   "a span that started at TIME or later (ISO 8601, UTC unless a zone is given)")
    g.add_argument("--phoenix-until", metavar="TIME", help="... and before TIME")
    g.add_argument("--trace-unit", metavar="KIND", help="one record per trace (trace, the "
                   "default) or per top-level span of this OpenInference kind (e.g. CHAIN)")
    g.add_argument("--trace-sessions", action=argparse.BooleanOptionalAction,
                   help="the records of traces sharing an OpenInference session.id become the "
                   "turns of one conversation, in the order they started")
    g.add_argument("--references", metavar="FILE", help="references and judgments for records "
                   "from traces: a records file of id, reference and/or judgments, joined by id")
    g.add_argument("--phoenix-annotate", action=argparse.BooleanOptionalAction,
                   help="after scoring, write each record's scores to the span it came from "
                   "on the --phoenix server, as span annotations (a rerun updates them)")
    g.add_argument("--run", help="a TREC run file: one record per query, its documents as "
                   "contexts (instead of a records file)")
    g.add_argument("--queries", help="query texts for --run (BEIR queries.jsonl or "
                   "id<TAB>text)")
    g.add_argument("--corpus", help="document texts for --run (BEIR corpus.jsonl or "
                   "id<TAB>text)")
    g.add_argument("--beir", metavar="DIR", help="a BEIR dataset directory for --run: "
                   "queries, corpus and qrels/<split>.tsv")
    g.add_argument("--split", help="the BEIR qrels split (default test)")
    g.add_argument("--depth", type=int, metavar="N", help="keep the top N documents per query "
                   "of --run")


def _judge_options(p: argparse.ArgumentParser) -> None:
    j = p.add_argument_group("judge (judge:<rubric> metrics, and claims:, nuggets:, citations:)")
    j.add_argument("--judge-model", metavar="MODEL",
                   help="judge model name (required for judge metrics, offline too: it is part "
                   "of the cache key)")
    j.add_argument("--judge-base-url", metavar="URL",
                   help="OpenAI-compatible endpoint (default: OpenAI's)")
    j.add_argument("--judge-api-key-env", metavar="VAR",
                   help="environment variable holding the API key (default OPENAI_API_KEY)")
    j.add_argument("--judge-concurrency", type=int, metavar="N",
                   help="judge requests in flight at once (default 16)")
    j.add_argument("--judge-rpm", type=float, metavar="N",
                   help="at most N judge requests started per minute")
    j.add_argument("--judge-response-format", choices=MODES,
                   help="how structured output is asked for: auto (default) steps down "
                   "json_schema -> json_object -> text as the endpoint refuses them, once per "
                   "endpoint and model; the others insist on one")
    j.add_argument("--judge-timeout", type=float, metavar="SECONDS",
                   help="seconds to wait for one attempt of a judge request (default 120)")
    j.add_argument("--judge-first-reply-timeout", type=float, metavar="SECONDS",
                   help="stop the run when the endpoint has not replied within this long of "
                   "the first request (a server that accepts connections and never answers); "
                   "default 300, or twice --judge-timeout when that is longer")
    j.add_argument("--judge-max-tokens", type=int, metavar="N",
                   help="the longest reply asked for (default: the endpoint's; set it for "
                   "small local models, which can write until their context is full)")
    j.add_argument("--judge-history-chars", type=int, metavar="N",
                   help="show a turn of a conversation with at most N characters of the turns "
                   "before it, the oldest left out first (default: all of them)")
    j.add_argument("--judge-extra", action="append", metavar="KEY=VALUE",
                   help="a request field of the server's own, sent as it is (repeatable; VALUE "
                   "read as JSON where it is, else text): e.g. repeat_penalty=1.1 or "
                   "cache_prompt=false for llama.cpp, top_k=1 for vLLM; part of the cache key "
                   "and the signature")
    j.add_argument("--judge-any-served-model", action=argparse.BooleanOptionalAction,
                   help="reuse cached replies even when the endpoint now names another served "
                   "model for --judge-model than they came from (by default the run stops)")
    j.add_argument("--judge-max-retries", type=int, metavar="N",
                   help="retries of a request after a passing fault: 429, 5xx, timeout, "
                   "dropped connection (default 5)")
    j.add_argument("--cache", metavar="PATH",
                   help="judge reply cache: a SQLite file (default .rageval/cache.sqlite), "
                   "or a JSONL export (rageval cache export) replayed as it is with --offline")
    j.add_argument("--offline", action=argparse.BooleanOptionalAction,
                   help="replay judge replies from the cache only; never call the network")
    j.add_argument("--allow-missing", action=argparse.BooleanOptionalAction,
                   help="with --offline: leave records the cache lacks unscored instead of "
                   "failing")
    j.add_argument("--refresh", action=argparse.BooleanOptionalAction,
                   help="ask the judge again even when a reply is cached (and store the new one)")
    j.add_argument("--prompts-dir", metavar="DIR",
                   help="directory of rubric .toml files, looked up by name before the "
                   "built-ins (also pairwise.toml and the claim-level steps, "
                   "e.g. check_claims.toml)")
    j.add_argument("--judge-temperature", type=float, metavar="T",
                   help="sampling temperature (default 0)")
    j.add_argument("--judge-seed", type=int, metavar="N",
                   help="seed sent with each request (sample i gets N+i)")
    j.add_argument("--judge-samples", type=int, metavar="N",
                   help="replies per item: the value is their mean, the spread goes in the "
                   "details (use a temperature above 0)")
    j.add_argument("--judge-logprobs", action=argparse.BooleanOptionalAction,
                   help="score by the expected value of the score token's top "
                   "log-probabilities (G-Eval); an endpoint that returns none is an error")
    j.add_argument("--judge-price-in", type=float, metavar="USD",
                   help="price per million prompt tokens, for the cost in the manifest")
    j.add_argument("--judge-price-out", type=float, metavar="USD",
                   help="price per million completion tokens, for the cost in the manifest")
    j.add_argument("--judge", action="append", metavar="SPEC", dest="judge_panel",
                   help="a member of a judge panel, repeatable (two or more): KEY=VALUE pairs "
                   "joined by commas, of name, model, base_url, api_key_env, prompts_dir, seed, "
                   "temperature (the rest as the --judge-* options say); each judge:* rubric is "
                   "then graded by every member")
    j.add_argument("--judge-panel-rule", choices=("mean", "median", "majority"),
                   help="how the members' values make the panel's: mean (default), median, or "
                   "majority (a 0-1 verdict: more than half of all the members, abstentions "
                   "counted)")
    j.add_argument("--panel-min-members", type=int, metavar="N",
                   help="let the panel go on while N members answer: a member whose judge "
                   "answers nothing (or stops) is then left out, where by default it stops the "
                   "run as a single judge would; recorded in the signature and the summary")
    j.add_argument("--judge-max-requests", type=int, metavar="N",
                   help="send at most N judge requests in this run: the records left are "
                   "unscored with the reason and the run exits with status 4 (every reply "
                   "received is cached: a rerun with a higher cap asks only for the rest)")
    j.add_argument("--judge-max-cost", type=float, metavar="USD",
                   help="stop before the judge request that would take this run's cost past "
                   "USD (at --judge-price-in/--judge-price-out; estimated before each request, "
                   "as a dry run estimates it); exit status 4 as with --judge-max-requests")
    j.add_argument("--judge-against", metavar="FILE",
                   help="judge:pairwise: the other system's records (paired by id), whose "
                   "answers this run's answers are compared with")
    j.add_argument("--judgments-from", choices=("judge",),
                   help="judge: grade the contexts of records without judgments "
                   "(context_relevance, 0-3) and use the grades as their judgments")
    j.add_argument("--dry-run", action=argparse.BooleanOptionalAction,
                   help="send nothing and write nothing: read the records and the judge cache, "
                   "render every prompt, and print per rubric (and claim step) the requests a "
                   "run would send, the cache hits, the estimated prompt and completion tokens "
                   "and the cost at --judge-price-in/--judge-price-out")
    j.add_argument("--human", metavar="FIELD",
                   help="the records' field of human labels (a number, or an object mapping "
                   "judge metrics to numbers): each judge mean is also given calibrated by "
                   "them (prediction-powered inference; at least 10 labelled records)")


def _gate_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("gate (exit status 3 when a check fails; see docs/gate.md)")
    g.add_argument("--fail-under", action="append", metavar="METRIC=VALUE",
                   help="fail when METRIC is under VALUE, repeatable: --fail-under ndcg@10=0.45")
    g.add_argument("--fail-over", action="append", metavar="METRIC=VALUE",
                   help="fail when METRIC is over VALUE (hallucination rates, cost_usd, "
                   "tokens), repeatable")
    g.add_argument("--gate-on", choices=("mean", "ci"),
                   help="compare the thresholds with the value (mean, the default) or with "
                   "the 95%% CI bound on the failing side (ci)")
    g.add_argument("--baseline", metavar="DIR",
                   help="a run directory to compare with: fail when a metric drops by more "
                   "than --max-drop and the paired randomization test says the drop is real")
    g.add_argument("--max-drop", type=float, metavar="X",
                   help="largest drop allowed against --baseline (default 0)")
    g.add_argument("--allow-data-change", action=argparse.BooleanOptionalAction,
                   help="compare with a --baseline that scored other data (other records, "
                   "field values or judge configuration), saying what changed; refused by "
                   "default")
    g.add_argument("--github", action=argparse.BooleanOptionalAction,
                   help="GitHub Actions output (on by itself where GITHUB_ACTIONS=true): the "
                   "summary table appended to $GITHUB_STEP_SUMMARY, and annotations for failed "
                   "gate checks and failed judge requests")
    g.add_argument("--markdown", metavar="FILE",
                   help="also write the summary table (value, CI, baseline, delta, p-value, "
                   "gate) as Markdown, for a pull-request comment")
    g.add_argument("--junit", metavar="FILE",
                   help="also write the run as JUnit XML: a test case per gate check (failed: "
                   "the value, the rule and the 95%% CI) and per metric with unscored records "
                   "(an error giving why), for CI systems to show")
    g.add_argument("--report", action=argparse.BooleanOptionalAction,
                   help="also write the run's HTML report (as rageval report does) to "
                   "DIR/report.html, DIR the --out directory")
