"""The options of a scoring run, declared once (:class:`~rageval.core.options.Option`), and
the fields of an evaluation file built from them.

The judge's options are declared on :class:`~rageval.judge.llm.config.JudgeConfig`; the rest
here, in the order ``rageval score --help`` lists them. Every field of an evaluation file sets
one option of ``rageval score`` (its argparse destination), so a file and the flags describe a
run in the same terms and a flag given on the command line overrides the field (``rageval run
eval.toml --offline --out x``). Kinds say how a TOML value is checked and turned into the
option's value:

``str``, ``int``, ``float``, ``bool``
    a value of that TOML type (an integer is accepted for a float);
``path``
    a string naming a file or directory, relative to the evaluation file's folder;
``out``
    a string naming a run directory (the output directory, the gate's baseline), relative to
    the directory rageval runs in: runs are written and found where the invocation is, as
    with ``--out`` and ``--baseline``;
``choice``
    a string among ``choices``;
``metrics``
    a list of metric names or inline tables ``{name = "ndcg", cutoff = 10, gain = "exp"}``;
``columns``
    a table of strings (``{query = "question"}``), given to the option as ``KEY=VALUE`` items;
``limits``
    a table of numbers (``{"ndcg@10" = 0.45}``), given as ``KEY=VALUE`` items;
``params``
    a table of JSON values (``{repeat_penalty = 1.1, cache_prompt = false}``), given as
    ``KEY=JSON`` items.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rageval.core.options import FileKey, Option
from rageval.judge.llm.config import JUDGE_OPTIONS


@dataclass(frozen=True)
class Field:
    path: tuple[str, ...]  # where it sits in the file: ("judge", "model")
    dest: str  # the option of `rageval score` it sets
    kind: str  # see the module docstring
    choices: tuple[str, ...] = ()
    doc: str = ""

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def _o(dest: str, *flags: str, file: tuple[str, ...] | None = None, **kwargs: Any) -> Option:
    """An option; ``file``: (table, key, kind[, doc]) in an evaluation file."""
    return Option(dest, flags, file=None if file is None else FileKey(*file), **kwargs)


# The input kinds are listed here rather than imported: config/ does not import inputs/ (a
# sibling room); a test checks they match rageval.inputs.spec.INPUT_KINDS.
INPUT_KINDS = ("records", "ragas", "trec-rag", "openinference", "otel-genai")
RECORD_FORMATS = ("jsonl", "json", "csv", "parquet", "arrow")

#: Options only an evaluation file gives (the records file is ``score``'s argument).
FILE_ONLY: tuple[Option, ...] = (
    _o("optional_metrics", file=("", "optional_metrics", "metrics",
                                 "metrics scored where their extra is installed, skipped with "
                                 "a note otherwise")),
    _o("description", file=("", "description", "str", "free text, shown nowhere but the file")),
    _o("records", file=("inputs", "records", "path", "the records file")),
)

#: How a run is scored and shown (the first options of ``rageval score``).
SCORING: tuple[Option, ...] = (
    _o("metrics", "-m", "--metric", append=True, metavar="METRIC",
       file=("", "metrics", "metrics", "the metrics to score"),
       help="metric name, repeatable: -m ndcg@10 -m 'p(rel=2)@5'"),
    _o("qrels", "--qrels", file=("inputs", "qrels", "path",
                                 "TREC qrels giving the records' judgments"),
       help="TREC qrels file giving the records' judgments"),
    _o("out", "--out", file=("output", "dir", "out",
                             "output directory, relative to where rageval runs"),
       help="output directory for records.jsonl and summary.json"),
    _o("format", "--format", choices=RECORD_FORMATS,
       file=("inputs", "format", "choice", "file format (default: from the extension)"),
       help="records format (default: from the file extension)"),
    _o("trec_convention", "--trec-convention", switch=True, default=False,
       file=("scoring", "trec_convention", "bool", "score as trec_eval does"),
       help="score queries without relevant judgments as 0, as trec_eval does, instead of "
       "leaving them unscored"),
    _o("seed", "--seed", type=int, default=0, file=("scoring", "seed", "int", "bootstrap seed"),
       help="bootstrap seed (default 0)"),
    _o("bootstrap", "--bootstrap", type=int, default=1000,
       file=("scoring", "bootstrap", "int", "bootstrap resamples"),
       help="bootstrap resamples for the 95%% CI (default 1000)"),
    _o("ci", "--ci", choices=("records", "judge-noise", "poisson"), default="records",
       file=("scoring", "ci", "choice", "how the 95% CIs are drawn"),
       help="how the 95%% CIs are drawn: records (default: the percentile bootstrap of the "
       "records, in running sums with Poisson weights past 100,000 records), judge-noise: for "
       "a judge metric asked several times per record (--judge-samples), the records and then "
       "each record's samples, so that the CI holds the judge's own noise, or poisson: "
       "running sums with Poisson weights from the first record"),
    _o("batch_size", "--batch-size", type=int, default=1000,
       file=("scoring", "batch_size", "int", "records per scoring batch"),
       help="records per scoring batch (default 1000)"),
    _o("engine", "--engine", choices=("local", "ray"), default="local",
       file=("scoring", "engine", "choice", "what scores the batches"),
       help="what scores the batches: this process (local, the default) or a Ray cluster "
       "(ray; pip install 'rageval[ray]'), with the same values"),
    _o("ray_address", "--ray-address", metavar="ADDRESS",
       file=("scoring", "ray_address", "str", "the Ray cluster's address"),
       help="the Ray cluster to use (default: a local one started for the run)"),
    _o("ray_workers", "--ray-workers", type=int, metavar="N",
       file=("scoring", "ray_workers", "int", "Ray actors scoring batches"),
       help="Ray actors scoring batches (default: the cluster's CPUs, at most 8)"),
    _o("window", "--window", type=int, metavar="N",
       file=("scoring", "window", "int", "records read and scored together"),
       help="records read and scored together from a records file (default 10000, on Ray "
       "100000): memory holds one window; with --out each record's results are written as "
       "they finish"),
    _o("max_line_bytes", "--max-line-bytes", type=int, metavar="N",
       file=("inputs", "max_line_bytes", "int", "longest records line read"),
       help="refuse a records line longer than N bytes (default 64 MiB): reading one takes "
       "several times its size in memory"),
    _o("embedding_cache", "--embedding-cache", metavar="DIR|none",
       file=("scoring", "embedding_cache", "str", "BERTScore embedding cache"),
       help="where BERTScore keeps token embeddings between runs (default: "
       "$RAGEVAL_EMBEDDING_CACHE, $RAGEVAL_CACHE_DIR/bertscore or ~/.cache/rageval/bertscore); "
       "none: keep none"),
    _o("components", "--components", switch=True, default=False,
       file=("output", "components", "bool", "every component in the table"),
       help="show every component (rouge2.precision, bleu.p1, ...) in the table, not only "
       "headline values (the files always hold all of them)"),
    _o("signatures", "--signatures", switch=True, default=False,
       file=("output", "signatures", "bool", "the signatures table under the summary"),
       help="show each value's full signature under the table (default: the short form, once "
       "per configuration)"),
    _o("turn_thresholds", "--turn-threshold", append=True, metavar="METRIC=VALUE",
       file=("output", "turn_thresholds", "limits",
             "metric = value under which a conversation's turn fails (conversations.jsonl)"),
       help="in conversations.jsonl, the first turn of each conversation whose METRIC falls "
       "under VALUE (over it where lower is better), repeatable: --turn-threshold "
       "ndcg@10=0.5"),
)

#: Inputs in other formats (docs/inputs.md).
INPUTS: tuple[Option, ...] = (
    _o("input_format", "--input-format", choices=INPUT_KINDS, default="records",
       file=("inputs", "kind", "choice", "how the file's columns are read"),
       help="how the records file's columns are read: records (rageval's, the default), ragas "
       "(question/contexts/answer/ground_truth columns, HF datasets style), trec-rag (a TREC "
       "RAG 2024 generation run), openinference (OpenTelemetry spans as OTLP/JSON: one record "
       "per trace), otel-genai (the same, by the OpenTelemetry GenAI conventions)"),
    _o("field_map", "--map", append=True, metavar="FIELD=COLUMN",
       file=("inputs", "map", "columns", "rageval field = the file's column"),
       help="read rageval's FIELD from the file's COLUMN, repeatable: --map query=question "
       "(for traces: a span attribute, --map id=metadata.qid)"),
    _o("phoenix", "--phoenix", metavar="URL",
       file=("inputs", "phoenix", "str", "a Phoenix server to read traces from"),
       help="read the traces of --project from this Phoenix server (instead of a file); its "
       "API key from PHOENIX_API_KEY"),
    _o("project", "--project", metavar="NAME",
       file=("inputs", "project", "str", "the Phoenix project to read"),
       help="the Phoenix project of --phoenix"),
    _o("phoenix_since", "--phoenix-since", metavar="TIME",
       file=("inputs", "phoenix_since", "str", "its spans that started at or after"),
       help="read the traces of --project with a span that started at TIME or later (ISO "
       "8601, UTC unless a zone is given)"),
    _o("phoenix_until", "--phoenix-until", metavar="TIME",
       file=("inputs", "phoenix_until", "str", "its spans that started before"),
       help="... and before TIME"),
    _o("trace_unit", "--trace-unit", metavar="KIND", default="trace",
       file=("inputs", "trace_unit", "str", "one record per trace, or per span of a kind"),
       help="one record per trace (trace, the default) or per top-level span of this "
       "OpenInference kind (e.g. CHAIN) or GenAI operation (e.g. invoke_agent)"),
    _o("trace_sessions", "--trace-sessions", switch=True, default=False,
       file=("inputs", "sessions", "bool", "traces of one session.id: one conversation"),
       help="the records of traces sharing an OpenInference session.id (GenAI: "
       "gen_ai.conversation.id) become the turns of one conversation, in the order they "
       "started"),
    _o("references", "--references", metavar="FILE",
       file=("inputs", "references", "path", "references and judgments for traces"),
       help="references and judgments for records from traces: a records file of id, "
       "reference and/or judgments, joined by id"),
    _o("phoenix_annotate", "--phoenix-annotate", switch=True, default=False,
       file=("output", "phoenix_annotate", "bool",
             "write each record's scores to its span on the Phoenix server"),
       help="after scoring, write each record's scores to the span it came from on the "
       "--phoenix server, as span annotations (a rerun updates them)"),
    _o("run", "--run", file=("inputs", "run", "path", "a TREC run to build records from"),
       help="a TREC run file: one record per query, its documents as contexts (instead of a "
       "records file)"),
    _o("queries", "--queries", file=("inputs", "queries", "path", "query texts for the run"),
       help="query texts for --run (BEIR queries.jsonl or id<TAB>text)"),
    _o("corpus", "--corpus", file=("inputs", "corpus", "path", "document texts for the run"),
       help="document texts for --run (BEIR corpus.jsonl or id<TAB>text)"),
    _o("beir", "--beir", metavar="DIR",
       file=("inputs", "beir", "path", "a BEIR dataset directory for the run"),
       help="a BEIR dataset directory for --run: queries, corpus and qrels/<split>.tsv"),
    _o("split", "--split", default="test", file=("inputs", "split", "str", "the BEIR qrels split"),
       help="the BEIR qrels split (default test)"),
    _o("depth", "--depth", type=int, metavar="N",
       file=("inputs", "depth", "int", "contexts kept per query of the run"),
       help="keep the top N documents per query of --run"),
)

#: What the judge does for the run beyond asking (beside the judge's own options).
JUDGE_USES: tuple[Option, ...] = (
    _o("judgments_from", "--judgments-from", choices=("judge",),
       file=("scoring", "judgments_from", "choice", "grade contexts by judge"),
       help="judge: grade the contexts of records without judgments (context_relevance, 0-3) "
       "and use the grades as their judgments"),
    _o("human", "--human", metavar="FIELD",
       file=("scoring", "human", "str", "the records' field of human labels"),
       help="the records' field of human labels (a number, or an object mapping judge metrics "
       "to numbers): each judge mean is also given calibrated by them (prediction-powered "
       "inference; at least 10 labelled records)"),
    _o("human_labels", "--human-labels", metavar="FILE",
       file=("scoring", "human_labels", "path", "a labels file of human labels"),
       help="a labels file (JSON Lines, as rageval annotate writes it) whose labels, joined by "
       "record id and metric and averaged across annotators, calibrate each judge mean (PPI, "
       "or active inference for actively selected labels), with the annotators' agreement; "
       "not with --human"),
    _o("allow_unknown_labels", "--allow-unknown-labels", switch=True, default=False,
       file=("scoring", "allow_unknown_labels", "bool",
             "ignore labels of records the run does not have"),
       help="count and ignore labels of --human-labels for record ids the run does not have "
       "(an error by default)"),
)

#: The gate (exit status 3 when a check fails; docs/gate.md) and the outputs for CI.
GATE: tuple[Option, ...] = (
    _o("fail_under", "--fail-under", append=True, metavar="METRIC=VALUE",
       file=("gate", "fail_under", "limits", "metric = lowest acceptable value"),
       help="fail when METRIC is under VALUE, repeatable: --fail-under ndcg@10=0.45"),
    _o("fail_over", "--fail-over", append=True, metavar="METRIC=VALUE",
       file=("gate", "fail_over", "limits", "metric = highest acceptable value"),
       help="fail when METRIC is over VALUE (hallucination rates, cost_usd, tokens), "
       "repeatable"),
    _o("gate_on", "--gate-on", choices=("mean", "ci"), default="mean",
       file=("gate", "on", "choice", "gate on the mean or the CI bound"),
       help="compare the thresholds with the value (mean, the default) or with the 95%% CI "
       "bound on the failing side (ci)"),
    _o("baseline", "--baseline", metavar="DIR",
       file=("gate", "baseline", "out", "a run directory to compare with"),
       help="a run directory to compare with: fail when a metric drops by more than "
       "--max-drop and the paired randomization test says the drop is real"),
    _o("max_drop", "--max-drop", type=float, metavar="X",
       file=("gate", "max_drop", "float", "largest drop against the baseline"),
       help="largest drop allowed against --baseline (default 0)"),
    _o("allow_data_change", "--allow-data-change", switch=True, default=False,
       file=("gate", "allow_data_change", "bool",
             "compare with a baseline that scored other data"),
       help="compare with a --baseline that scored other data (other records, field values "
       "or judge configuration), saying what changed; refused by default"),
    _o("github", "--github", switch=True,
       help="GitHub Actions output (on by itself where GITHUB_ACTIONS=true): the summary "
       "table appended to $GITHUB_STEP_SUMMARY, and annotations for failed gate checks and "
       "failed judge requests"),
    _o("markdown", "--markdown", metavar="FILE",
       file=("output", "markdown", "out", "the summary table as Markdown, at this path"),
       help="also write the summary table (value, CI, baseline, delta, p-value, gate) as "
       "Markdown, for a pull-request comment"),
    _o("junit", "--junit", metavar="FILE",
       file=("output", "junit", "out", "the run and its gate as JUnit XML, at this path"),
       help="also write the run as JUnit XML: a test case per gate check (failed: the value, "
       "the rule and the 95%% CI) and per metric with unscored records (an error giving why), "
       "for CI systems to show"),
    _o("report", "--report", switch=True,
       file=("output", "report", "bool", "the run's HTML report, in the output directory"),
       help="also write the run's HTML report (as rageval report does) to DIR/report.html, "
       "DIR the --out directory"),
)

#: The run logged as an MLflow run (docs/mlflow.md).
MLFLOW: tuple[Option, ...] = (
    _o("mlflow_tracking_uri", "--mlflow-tracking-uri", metavar="URI",
       file=("output", "mlflow_tracking_uri", "str", "the MLflow tracking store to log to"),
       help="also log the run as an MLflow run to this tracking store (an http(s) server, "
       "sqlite:///FILE, a database; a folder only with MLFLOW_ALLOW_FILE_STORE=true on "
       "recent MLflow), checked before scoring: headline values and CIs as metrics, "
       "signatures and settings as params, the run's files as artifacts (pip install "
       "'rageval[mlflow]'); default: "
       "$MLFLOW_TRACKING_URI when --mlflow-experiment is given"),
    _o("mlflow_experiment", "--mlflow-experiment", metavar="NAME",
       file=("output", "mlflow_experiment", "str", "the MLflow experiment to log to"),
       help="the MLflow experiment of the run (made when missing; default: "
       "$MLFLOW_EXPERIMENT_NAME, else rageval)"),
)

#: The run's values as OpenTelemetry GenAI evaluation events (docs/otel-events.md).
OTEL: tuple[Option, ...] = (
    _o("otel_events", "--otel-events", metavar="FILE",
       file=("output", "otel_events", "out",
             "the run's values as OpenTelemetry evaluation events (OTLP/JSON), at this path"),
       help="also write each record's values as OpenTelemetry gen_ai.evaluation.result "
       "events, on the spans the records came from, to this OTLP/JSON logs file (pip install "
       "'rageval[otel]')"),
    _o("otel_endpoint", "--otel-endpoint", metavar="URL",
       file=("output", "otel_endpoint", "str",
             "the OTLP/HTTP collector the evaluation events are sent to"),
       help="also send those events to this OTLP/HTTP collector (http://host:4318: its "
       "/v1/logs; a URL with a path is used as it is; headers from OTEL_EXPORTER_OTLP_HEADERS)"),
)

#: Every option of a scoring run.
SCORE_OPTIONS: tuple[Option, ...] = (*SCORING, *INPUTS, *JUDGE_OPTIONS, *JUDGE_USES, *GATE,
                                     *MLFLOW, *OTEL)


def fields_of(options: Iterable[Option]) -> list[Field]:
    """The evaluation-file fields of ``options`` (those an evaluation file may give)."""
    return [Field(tuple(p for p in (o.file.table, o.file.key) if p), o.dest, o.file.kind,
                  o.choices, o.file.doc)
            for o in options if o.file is not None]


FIELDS: list[Field] = fields_of((*FILE_ONLY, *SCORE_OPTIONS))
BY_PATH: dict[tuple[str, ...], Field] = {f.path: f for f in FIELDS}
TABLES: frozenset[str] = frozenset(f.path[0] for f in FIELDS if len(f.path) == 2)
