"""The fields of an evaluation file and the command-line option each one stands for.

Every field sets one option of ``rageval score`` (its argparse destination), so a file and the
flags describe a run in the same terms and a flag given on the command line overrides the
field (``rageval run eval.toml --offline --out x``). Kinds say how a TOML value is checked
and turned into the option's value:

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

from dataclasses import dataclass


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


def _fields(table: str, rows: list[tuple]) -> list[Field]:
    path = (table,) if table else ()
    return [Field((*path, key), dest, kind, tuple(choices), doc)
            for key, dest, kind, choices, doc in rows]


# The response formats and input kinds are listed here rather than imported so that reading a
# file stays cheap; tests check they match rageval.judge.llm.formats.MODES and INPUT_KINDS.
RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "text")
INPUT_KINDS = ("records", "ragas", "trec-rag", "openinference")

FIELDS: list[Field] = [
    *_fields("", [
        ("metrics", "metrics", "metrics", (), "the metrics to score"),
        ("optional_metrics", "optional_metrics", "metrics", (),
         "metrics scored where their extra is installed, skipped with a note otherwise"),
        ("description", "description", "str", (), "free text, shown nowhere but the file"),
    ]),
    *_fields("inputs", [
        ("records", "records", "path", (), "the records file"),
        ("kind", "input_format", "choice", INPUT_KINDS, "how the file's columns are read"),
        ("map", "field_map", "columns", (), "rageval field = the file's column"),
        ("format", "format", "choice", ("jsonl", "json", "csv", "parquet", "arrow"),
         "file format (default: from the extension)"),
        ("qrels", "qrels", "path", (), "TREC qrels giving the records' judgments"),
        ("run", "run", "path", (), "a TREC run to build records from"),
        ("queries", "queries", "path", (), "query texts for the run"),
        ("corpus", "corpus", "path", (), "document texts for the run"),
        ("beir", "beir", "path", (), "a BEIR dataset directory for the run"),
        ("split", "split", "str", (), "the BEIR qrels split"),
        ("depth", "depth", "int", (), "contexts kept per query of the run"),
        ("max_line_bytes", "max_line_bytes", "int", (), "longest records line read"),
        ("phoenix", "phoenix", "str", (), "a Phoenix server to read traces from"),
        ("project", "project", "str", (), "the Phoenix project to read"),
        ("phoenix_since", "phoenix_since", "str", (), "its spans that started at or after"),
        ("phoenix_until", "phoenix_until", "str", (), "its spans that started before"),
        ("trace_unit", "trace_unit", "str", (), "one record per trace, or per span of a kind"),
        ("sessions", "trace_sessions", "bool", (), "traces of one session.id: one conversation"),
        ("references", "references", "path", (), "references and judgments for traces"),
    ]),
    *_fields("scoring", [
        ("seed", "seed", "int", (), "bootstrap seed"),
        ("bootstrap", "bootstrap", "int", (), "bootstrap resamples"),
        ("batch_size", "batch_size", "int", (), "records per scoring batch"),
        ("ci", "ci", "choice", ("records", "judge-noise", "poisson"),
         "how the 95% CIs are drawn"),
        ("window", "window", "int", (), "records read and scored together"),
        ("engine", "engine", "choice", ("local", "ray"), "what scores the batches"),
        ("ray_address", "ray_address", "str", (), "the Ray cluster's address"),
        ("ray_workers", "ray_workers", "int", (), "Ray actors scoring batches"),
        ("trec_convention", "trec_convention", "bool", (), "score as trec_eval does"),
        ("embedding_cache", "embedding_cache", "str", (), "BERTScore embedding cache"),
        ("judgments_from", "judgments_from", "choice", ("judge",), "grade contexts by judge"),
        ("human", "human", "str", (), "the records' field of human labels"),
    ]),
    *_fields("judge", [
        ("model", "judge_model", "str", (), ""),
        ("base_url", "judge_base_url", "str", (), ""),
        ("api_key_env", "judge_api_key_env", "str", (), ""),
        ("concurrency", "judge_concurrency", "int", (), ""),
        ("rpm", "judge_rpm", "float", (), ""),
        ("response_format", "judge_response_format", "choice", RESPONSE_FORMATS, ""),
        ("timeout", "judge_timeout", "float", (), ""),
        ("first_reply_timeout", "judge_first_reply_timeout", "float", (), ""),
        ("max_tokens", "judge_max_tokens", "int", (), ""),
        ("history_chars", "judge_history_chars", "int", (), ""),
        ("extra", "judge_extra", "params", (), "request fields of the server's own"),
        ("any_served_model", "judge_any_served_model", "bool", (), ""),
        ("max_retries", "judge_max_retries", "int", (), ""),
        ("cache", "cache", "path", (), ""),
        ("offline", "offline", "bool", (), ""),
        ("allow_missing", "allow_missing", "bool", (), ""),
        ("refresh", "refresh", "bool", (), ""),
        ("prompts_dir", "prompts_dir", "path", (), ""),
        ("temperature", "judge_temperature", "float", (), ""),
        ("seed", "judge_seed", "int", (), ""),
        ("samples", "judge_samples", "int", (), ""),
        ("logprobs", "judge_logprobs", "bool", (), ""),
        ("price_in", "judge_price_in", "float", (), ""),
        ("price_out", "judge_price_out", "float", (), ""),
        ("max_requests", "judge_max_requests", "int", (), "judge requests sent at most"),
        ("panel", "judge_panel", "strings", (), "a judge panel's members (--judge specs)"),
        ("panel_rule", "judge_panel_rule", "choice", ("mean", "median", "majority"),
         "how the members' values make the panel's"),
        ("panel_min_members", "panel_min_members", "int", (),
         "members that must answer for the panel to go on without the others"),
        ("max_cost", "judge_max_cost", "float", (), "USD this run may spend on the judge"),
        ("against", "judge_against", "path", (), ""),
    ]),
    *_fields("output", [
        ("dir", "out", "out", (), "output directory, relative to where rageval runs"),
        ("components", "components", "bool", (), "every component in the table"),
        ("signatures", "signatures", "bool", (), "the signatures table under the summary"),
        ("junit", "junit", "out", (), "the run and its gate as JUnit XML, at this path"),
        ("markdown", "markdown", "out", (), "the summary table as Markdown, at this path"),
        ("report", "report", "bool", (), "the run's HTML report, in the output directory"),
        ("turn_thresholds", "turn_thresholds", "limits", (),
         "metric = value under which a conversation's turn fails (conversations.jsonl)"),
        ("phoenix_annotate", "phoenix_annotate", "bool", (),
         "write each record's scores to its span on the Phoenix server"),
    ]),
    *_fields("gate", [
        ("fail_under", "fail_under", "limits", (), "metric = lowest acceptable value"),
        ("fail_over", "fail_over", "limits", (), "metric = highest acceptable value"),
        ("on", "gate_on", "choice", ("mean", "ci"), "gate on the mean or the CI bound"),
        ("baseline", "baseline", "out", (), "a run directory to compare with"),
        ("max_drop", "max_drop", "float", (), "largest drop against the baseline"),
        ("allow_data_change", "allow_data_change", "bool", (),
         "compare with a baseline that scored other data"),
    ]),
]

BY_PATH: dict[tuple[str, ...], Field] = {f.path: f for f in FIELDS}
TABLES: frozenset[str] = frozenset(f.path[0] for f in FIELDS if len(f.path) == 2)
