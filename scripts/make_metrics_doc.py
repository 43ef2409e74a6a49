"""Write docs/metrics.md, the metric reference, from rageval's metric registry.

    python scripts/make_metrics_doc.py            # write docs/metrics.md
    python scripts/make_metrics_doc.py --check    # exit 1, with a diff, when the file is stale

Every metric the registry knows is listed: each registered class (``ndcg``, ``bleu``, ...),
each open-ended family (``rougeN``), and each metric of a name-prefixed namespace (the
built-in judge rubrics and ``judge:pairwise``, the ``claims:``, ``nuggets:`` and
``citations:`` metrics). For each: how it is written, its declared parameters, its reference
implementation, where its value and its signature are computed (read from the class with
``inspect``), and the tests that hold it.

The reference implementation and the tests come from :data:`REFERENCES`, keyed by the
registered name, the family's pattern or the namespace. A metric without an entry, or an entry
naming a test that does not exist, is an error that names it: the page is not written and
``--check`` fails.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FunctionType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rageval.core import registry  # noqa: E402  (the checkout's rageval, not an installed one)
from rageval.core.metric import Metric, Param, render_value  # noqa: E402

PAGE = ROOT / "docs" / "metrics.md"
NONE = "none: rageval's own definition"


@dataclass(frozen=True)
class Reference:
    """What a metric is held against: the reference implementation (or :data:`NONE`), the
    parity tests that compare rageval with it, and other tests that hold the value (worked
    examples, replays), each written ``path::test_name``."""

    implementation: str
    parity: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    note: str = ""


# The record metrics are compared with pytrec_eval (trec_eval's C code) record by record, and
# run the kernels that `rageval trec-eval` runs, which are compared byte for byte with the
# trec_eval 10.0 binary.
_RECORDS_VS_PYTREC = ("tests/retrieval/test_record_metrics_parity.py::"
                      "test_record_metrics_equal_pytrec_eval")
_RECORDS_VS_ENGINE = "tests/retrieval/test_retrieval_metrics.py::test_records_and_trec_files_agree"
_BINARY = "tests/retrieval/test_trec_eval_binary.py::test_generated_cases"
_PYTREC = "tests/retrieval/test_pytrec_parity.py::test_per_query_and_summary_parity"
_RETRIEVAL_PARITY = (_RECORDS_VS_PYTREC, _BINARY, _PYTREC)
_ROUGE_PARITY = (
    "tests/generation/test_rouge.py::test_parity_on_generated_answer_like_pairs",
    "tests/generation/test_rouge.py::test_parity_on_edge_cases_every_pair",
    "tests/generation/test_rouge.py::test_property_parity_on_random_short_texts",
    "tests/generation/test_rouge.py::test_multiple_references_each_metric_picks_its_own_best",
)
_ROUGE = "rouge-score (`rouge_scorer.RougeScorer`)"

#: Metric -> reference implementation and tests. Keys: a registered name (``ndcg``), a
#: family's pattern (``rouge[1-9][0-9]*``), or a namespace with its colon (``claims:``); the
#: judge's namespace has ``judge:`` for its rubrics and ``judge:pairwise``.
REFERENCES: dict[str, Reference] = {
    "p": Reference("trec_eval 10.0 (`P`)", _RETRIEVAL_PARITY, (
        _RECORDS_VS_ENGINE,
        "tests/retrieval/test_retrieval_metrics.py::test_precision_at_5_revenue_example")),
    "recall": Reference("trec_eval 10.0 (`recall`; `set_recall` without a cutoff)",
                        _RETRIEVAL_PARITY, (_RECORDS_VS_ENGINE,)),
    "f1": Reference(
        "trec_eval 10.0 (`set_F`) without a cutoff; with a cutoff, " + NONE,
        _RETRIEVAL_PARITY,
        ("tests/retrieval/test_retrieval_metrics.py::test_kirchhoff_binary_examples",),
        "trec_eval has no F1 at a cutoff: `f1@k` is the harmonic mean of `p@k` and "
        "`recall@k`."),
    "hit": Reference("trec_eval 10.0 (`success`)", _RETRIEVAL_PARITY, (
        "tests/retrieval/test_retrieval_metrics.py::test_mean_rank_and_hit_rate_examples",)),
    "mrr": Reference("trec_eval 10.0 (`recip_rank`)", _RETRIEVAL_PARITY, (
        _RECORDS_VS_ENGINE,
        "tests/retrieval/test_retrieval_metrics.py::test_protopapas_mrr_example"),
        "trec_eval has no cutoff for `recip_rank`: `mrr@k` looks at the top k only."),
    "mean_rank": Reference(NONE, (), (
        "tests/retrieval/test_retrieval_metrics.py::test_mean_rank_and_hit_rate_examples",
        "tests/retrieval/test_retrieval_metrics.py::test_mean_rank_missing_policy",
        "tests/core/test_metric_properties.py::test_mrr_and_mean_rank_agree")),
    "map": Reference("trec_eval 10.0 (`map`; `map_cut` with a cutoff)", _RETRIEVAL_PARITY, (
        _RECORDS_VS_ENGINE,
        "tests/retrieval/test_retrieval_metrics.py::test_average_precision_example")),
    "rprec": Reference("trec_eval 10.0 (`Rprec`)", _RETRIEVAL_PARITY),
    "bpref": Reference("trec_eval 10.0 (`bpref`)", _RETRIEVAL_PARITY, (
        "tests/retrieval/test_kernels.py::test_bpref_hand_example",)),
    "dcg": Reference(NONE, (), (
        "tests/retrieval/test_retrieval_metrics.py::test_dcg_and_ndcg_examples",
        "tests/retrieval/test_retrieval_metrics.py::test_exponential_gain"),
        "trec_eval prints no DCG: with `gain=linear` this is the numerator of its "
        "`ndcg_cut`."),
    "ndcg": Reference("trec_eval 10.0 (`ndcg_cut`; `ndcg` without a cutoff)",
                      _RETRIEVAL_PARITY, (
        _RECORDS_VS_ENGINE,
        "tests/retrieval/test_retrieval_metrics.py::test_dcg_and_ndcg_examples",
        "tests/retrieval/test_retrieval_metrics.py::test_exponential_gain"),
        "`gain=exp` (2^g - 1) is not a trec_eval setting: rageval's own definition, "
        "held by the worked examples."),
    "err": Reference(NONE, (), (
        "tests/retrieval/test_retrieval_metrics.py::test_err_hand_computed",
        "tests/retrieval/test_kernels.py::test_err_hand_checked"),
        "Chapelle et al. 2009; trec_eval has no ERR."),
    "auc": Reference(NONE, (), (
        "tests/retrieval/test_retrieval_metrics.py::test_auc_with_ties",
        "tests/retrieval/test_kernels.py::test_roc_auc_with_ties")),
    "rouge1": Reference(_ROUGE, _ROUGE_PARITY),
    "rouge2": Reference(_ROUGE, _ROUGE_PARITY),
    "rougeL": Reference(_ROUGE, _ROUGE_PARITY),
    "rougeLsum": Reference(_ROUGE, _ROUGE_PARITY),
    "rouge[1-9][0-9]*": Reference(
        "rouge-score (`rouge_scorer.RougeScorer`, up to `rouge9`); above, " + NONE,
        _ROUGE_PARITY,
        ("tests/generation/test_rouge.py::test_rouge_n_for_large_n_follows_the_same_definition",),
        "rouge-score stops at rouge9; larger N follow the same formula, held against a "
        "direct count."),
    "bleu": Reference("sacrebleu (`BLEU.sentence_score`, `BLEU.corpus_score`)", (
        "tests/generation/test_bleu.py::test_per_record_and_corpus_parity",
        "tests/generation/test_bleu.py::test_statistics_are_sacrebleus_before_smoothing",
        "tests/generation/test_bleu.py::test_corpus_bleu_of_a_resample_is_sacrebleus",
        "tests/generation/test_bleu.py::test_signature_mirrors_sacrebleu")),
    "bertscore": Reference("bert-score (`bert_score.score`)", (
        "tests/generation/test_bertscore.py::test_parity_with_bert_score",
        "tests/generation/test_bertscore.py::test_parity_of_rescaling"), (
        "tests/generation/test_bertscore.py::test_signature_carries_bert_scores_hash",)),
    "judge:": Reference(NONE, (), (
        "tests/judge/rubric/test_judge_metric.py::test_scored_run_then_offline_replay",
        "tests/judge/rubric/test_judge_metric.py::test_unusable_replies_are_unscored_with_raw",
        "tests/test_readme.py::test_demo_judge_cache_comes_from_the_local_model"),
        "The value is the judge's score on the rubric's scale; the tests hold how it is read "
        "from the reply and replayed from the cache."),
    "judge:pairwise": Reference(NONE, (), (
        "tests/judge/pairwise/test_judge_pairwise.py::"
        "test_consistent_judge_gives_wins_losses_and_ties",
        "tests/judge/pairwise/test_judge_pairwise.py::"
        "test_position_bias_is_a_tie_and_lowers_consistency",
        "tests/judge/pairwise/test_judge_pairwise.py::test_offline_replay_sends_nothing_and_reproduces")),
    "claims:": Reference("RAGChecker 0.1.9 (`ragchecker/computation.py`)", (
        "tests/judge/claims/test_claim_scores.py::test_parity_with_ragchecker_on_random_verdicts",
        "tests/judge/claims/test_claim_scores.py::test_ragchecker_example_per_record",
        "tests/judge/claims/test_claim_scores.py::test_ragchecker_example_aggregate"), (
        "tests/judge/claims/test_claim_scores.py::test_hand_computed_record",
        "tests/judge/claims/test_claim_metrics.py::test_every_value_recomputes_from_records_jsonl")),
    "nuggets:": Reference("nuggetizer 0.0.5 (`nuggetizer/core/metrics.py`)", (
        "tests/judge/claims/test_claim_scores.py::test_parity_with_nuggetizer_on_random_nuggets",
    ), (
        "tests/judge/claims/test_claim_scores.py::test_nuggets_hand_computed",
        "tests/judge/claims/test_claim_metrics.py::test_every_value_recomputes_from_records_jsonl")),
    "citations:": Reference(
        "ALCE (`compute_autoais`), ported: ALCE is not a package, so no parity test runs it",
        (), (
            "tests/judge/claims/test_citations.py::test_single_citations",
            "tests/judge/claims/test_citations.py::test_one_unnecessary_citation_of_several",
            "tests/judge/claims/test_citations.py::"
            "test_a_statement_supported_only_jointly_credits_both_citations",
            "tests/judge/claims/test_citations.py::test_invalid_and_uncited_statements"),
        "The formulas and every departure from ALCE are in the card at the top of "
        "`rageval/judge/claims/citation_scores.py`."),
}


@dataclass(frozen=True)
class Entry:
    """One metric as the page lists it."""

    name: str  # as written: "ndcg", "rougeN", "judge:faithfulness", "claims:f1"
    key: str  # its key in REFERENCES
    cls: type[Metric]
    summary: str
    params: tuple[Param, ...]
    cutoff_rule: str
    extra: tuple[str, ...] = ()  # lines the namespace adds (a rubric's file and scale)


# -- what the registry holds ----------------------------------------------------------------

def _judge_entries() -> Iterator[Entry]:
    from rageval.judge.pairwise.metric import PairwiseMetric
    from rageval.judge.rubric.metric import JudgeMetric
    from rageval.judge.rubric.rubrics import list_rubrics, load_rubric

    for name in list_rubrics(None):
        if name == "pairwise":
            continue
        rubric = load_rubric(name, None)
        source = _relative(Path(rubric.source))
        per_context = " (each context; the record's value is the mean)" if (
            "context" in rubric.inputs) else ""
        extra = (f"Rubric file: `{source}` (version {rubric.version}); scale "
                 f"{rubric.scale_min}-{rubric.scale_max}{per_context}; inputs: "
                 f"{', '.join(rubric.inputs)}.",)
        yield Entry(f"judge:{name}", "judge:", JudgeMetric, rubric.description,
                    JudgeMetric.params, JudgeMetric.cutoff_rule, extra)
    from rageval.judge.pairwise.prompt import load_pairwise_prompt

    prompt = _relative(Path(load_pairwise_prompt(None).source))
    yield Entry("judge:pairwise", "judge:pairwise", PairwiseMetric,
                "This run's answer against the answer of `--judge-against FILE` for the same "
                "id, asked in both orders: 1 win, 0.5 tie, 0 loss (components `.win`, `.tie`, "
                "`.loss`, `.consistent`).", PairwiseMetric.params, PairwiseMetric.cutoff_rule,
                (f"Prompt file: `{prompt}`.",))


def _claim_entries(kind: str) -> Iterator[Entry]:
    from rageval.judge.catalog import _CLAIM_LEVEL
    from rageval.judge.claims.metrics import KINDS

    cls = KINDS[kind]
    for target in cls.targets:
        name = f"{kind}:{target}"
        steps = ", ".join(f"`prompts/claims/{step}.toml`" for step in cls(target).used_steps())
        yield Entry(name, f"{kind}:", cls, f"Share of {_CLAIM_LEVEL[name]} (0-1).",
                    cls.params, cls.cutoff_rule, (f"Judge steps: {steps}.",))


#: How the metrics of each built-in namespace are listed.
NAMESPACES: dict[str, Callable[[], Iterator[Entry]]] = {
    "judge": _judge_entries,
    "claims": lambda: _claim_entries("claims"),
    "nuggets": lambda: _claim_entries("nuggets"),
    "citations": lambda: _claim_entries("citations"),
}


def entries() -> tuple[list[Entry], list[str]]:
    """Every metric the registry knows, and the problems found (a namespace nobody lists)."""
    classes = registry.metric_classes()  # loads the built-in families
    out: list[Entry] = []
    problems: list[str] = []
    for name, cls in classes.items():
        out.append(Entry(name, name, cls, cls.summary, cls.params, cls.cutoff_rule))
    for pattern, make_class in registry._FAMILIES:
        cls = _family_class(pattern.pattern, make_class)
        label = pattern.pattern.replace("[1-9][0-9]*", "N")
        summary = (f"{cls.summary.rstrip('.')}. Shown for `{cls.base}`: every name the "
                   f"pattern `{pattern.pattern}` matches and no class registers works alike.")
        out.append(Entry(label, pattern.pattern, cls, summary, cls.params, cls.cutoff_rule))
    known = [namespace for namespace in NAMESPACES if namespace in registry._NAMESPACES]
    for namespace in [*known, *sorted(set(registry._NAMESPACES) - set(known))]:
        lister = NAMESPACES.get(namespace)
        if lister is None:
            problems.append(f"metric namespace '{namespace}:' has no entry in NAMESPACES and "
                            "REFERENCES of scripts/make_metrics_doc.py")
            continue
        out.extend(lister())
    return out, problems


def _family_class(pattern: str, make_class: Callable[[str], type[Metric]]) -> type[Metric]:
    """A class of an open-ended family: the first name its pattern takes that no registered
    class has (``rouge3`` for ``rouge[1-9][0-9]*``)."""
    registered = set(registry.metric_classes())
    stem = pattern.split("[", 1)[0]
    for n in range(1, 100):
        if f"{stem}{n}" not in registered:
            return make_class(f"{stem}{n}")
    raise ValueError(f"no free name in family {pattern}")


# -- where the code is ----------------------------------------------------------------------

#: The method that computes a metric's per-record value, looked for in this order.
VALUE_METHODS = ("compute", "counts", "formula", "score")


def _owner(cls: type, method: str) -> type | None:
    """The class of ``cls``'s MRO that defines ``method`` (concretely), or None."""
    for klass in cls.__mro__:
        func = klass.__dict__.get(method)
        if func is not None:
            return None if getattr(func, "__isabstractmethod__", False) else klass
    return None


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:  # an installed copy: name it from the package root
        parts = path.resolve().parts
        return "/".join(parts[parts.index("rageval"):]) if "rageval" in parts else str(path)


def _where(obj: Any) -> str:
    return f"`{_relative(Path(inspect.getsourcefile(obj) or '?'))}`"


def _method_ref(klass: type, method: str) -> str:
    return f"`{klass.__qualname__}.{method}` in {_where(klass.__dict__[method])}"


def _called(func: FunctionType) -> list[Any]:
    """The functions of other rageval modules (the core's helpers left out) that ``func``
    calls by name: the kernel behind a thin method."""
    source = textwrap.dedent(inspect.getsource(func))
    found: list[Any] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        target = _resolve(node.func, func.__globals__)
        module = getattr(target, "__module__", "") or ""
        if (inspect.isfunction(target) and module.startswith("rageval.")
                and not module.startswith("rageval.core.") and module != func.__module__
                and target not in found):
            found.append(target)
    return found


def _resolve(node: ast.expr, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, names)
        return getattr(base, node.attr, None) if inspect.ismodule(base) else None
    return None


def value_code(cls: type[Metric]) -> list[str]:
    """Where the value is computed: the first of :data:`VALUE_METHODS` the class defines, the
    rageval functions a thin one calls (the kernel), the batch method around it and a corpus
    figure's."""
    lines: list[str] = []
    for method in VALUE_METHODS:
        owner = _owner(cls, method)
        if owner is None:
            continue
        func = owner.__dict__[method]
        line = _method_ref(owner, method)
        # A thin method names its kernel; a whole batch's ``score`` calls too much to list.
        calls = _called(func) if method != "score" else []
        if calls:
            line += ", which calls " + ", ".join(
                f"`{c.__name__}` in {_where(c)}" for c in calls)
        lines.append(line)
        if method != "score":
            score_owner = _owner(cls, "score")
            if score_owner is not None:
                lines.append("per batch: " + _method_ref(score_owner, "score"))
        break
    corpus = _owner(cls, "corpus_value")
    if corpus is not None and corpus is not Metric:
        lines.append("the summary's corpus figure: " + _method_ref(corpus, "corpus_value"))
    return lines


def signature_code(cls: type[Metric]) -> list[str]:
    """Where the signature is built: ``signature`` (the base class's, or an override), the
    fields the class adds (``signature_extra``) and what it reads from the results
    (``result_signature``)."""
    lines = [_method_ref(_owner(cls, "signature") or Metric, "signature")]
    for method in ("signature_extra", "result_signature"):
        owner = _owner(cls, method)
        if owner is not None and owner is not Metric:
            lines.append(_method_ref(owner, method))
    return lines


# -- tests ------------------------------------------------------------------------------------

def missing_tests(reference: Reference) -> list[str]:
    """The ``path::name`` entries of ``reference`` whose test function is not there."""
    return [test for test in (*reference.parity, *reference.tests) if not _test_exists(test)]


@functools.cache
def _parsed(file: Path) -> ast.Module | None:
    return ast.parse(file.read_text(encoding="utf-8")) if file.is_file() else None


def _test_exists(test: str) -> bool:
    path, _, name = test.partition("::")
    tree = _parsed(ROOT / path)
    if not name or tree is None:
        return False
    scopes: list[list[ast.stmt]] = [tree.body]
    *classes, function = name.split("::")
    for cls_name in classes:
        body = next((n.body for n in scopes[-1]
                     if isinstance(n, ast.ClassDef) and n.name == cls_name), None)
        if body is None:
            return False
        scopes.append(body)
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function
               for n in scopes[-1])


# -- the page ---------------------------------------------------------------------------------

HEADER = """\
# Metric reference

<!-- Written by scripts/make_metrics_doc.py from the metric registry; do not edit by hand.
     tests/test_docs_metrics.py fails when it is stale. -->

Every metric rageval registers, read from its registry by `scripts/make_metrics_doc.py` (a
test fails when this page is out of date). For each: how it is written, its parameters (name,
type, default, meaning), the reference implementation its values are held against, where the
value and the signature are computed, and the tests that hold it. Paths are relative to the
repository root; `Class.method in file` names the code. Definitions, edge cases and worked
examples: [retrieval](retrieval.md), [generation](generation.md), [judge](judge.md),
[claims](claims.md); the name grammar: [Metric names](#metric-names).

## Metric names

`name[(key=value,...)][@k]`: a base name, its parameters in parentheses, and a cutoff after
`@` where the metric takes one (`p@5`, `p(rel=2)@5`, `ndcg(gain=exp)@10`, `err(gmax=3)@10`).
Parameters left at their default are omitted from the canonical name, the one every output
uses. Judge and claim-level metrics are prefixed by their namespace (`judge:faithfulness`,
`claims:f1`, `nuggets:vital_strict(source=contexts)`).

## Index

| metric | family | reference implementation |
| --- | --- | --- |
"""


def _anchor(name: str) -> str:
    """The id MkDocs gives the heading ``### `name` `` (Python-Markdown's toc slugify)."""
    import re
    import unicodedata

    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _written(entry: Entry) -> str:
    keys = ",".join(f"{p.name}=..." for p in entry.params)
    params = f"[({keys})]" if keys else ""
    cutoff = {"none": "", "optional": "[@k]", "required": "@k"}[entry.cutoff_rule]
    return f"`{entry.name}{params}{cutoff}`"


def _param_row(param: Param) -> str:
    default = "not set" if param.default is None else f"`{render_value(param.default)}`"
    allowed = ""
    if param.choices is not None:
        allowed = ", ".join(f"`{render_value(c)}`" for c in param.choices)
    elif param.minimum is not None:
        allowed = f">= {param.minimum:g}"
    doc = param.doc.replace("|", "\\|")
    return f"| `{param.name}` | {param.type.__name__} | {default} | {allowed} | {doc} |"


def _section(entry: Entry, reference: Reference) -> list[str]:
    cutoff = {"none": "no cutoff", "optional": "an optional cutoff `@k`",
              "required": "a required cutoff `@k`"}[entry.cutoff_rule]
    summary = entry.summary.rstrip(".") + "."
    summary = summary[:1].upper() + summary[1:]
    lines = [f"### `{entry.name}`", "", summary, "",
             f"- **Written**: {_written(entry)} ({cutoff}).",
             *(f"- {line}" for line in entry.extra),
             f"- **Reference implementation**: {reference.implementation}.",
             "- **Value computed in**: " + "; ".join(value_code(entry.cls)) + ".",
             "- **Signature built in**: " + "; ".join(signature_code(entry.cls)) + "."]
    parity = ", ".join(f"`{t}`" for t in reference.parity) or "none"
    lines.append(f"- **Parity tests**: {parity}.")
    if reference.tests:
        lines.append("- **Other tests**: " + ", ".join(f"`{t}`" for t in reference.tests) + ".")
    if reference.note:
        lines.append(f"- **Note**: {reference.note}")
    if entry.params:
        lines += ["", "| parameter | type | default | allowed | meaning |",
                  "| --- | --- | --- | --- | --- |", *(_param_row(p) for p in entry.params)]
    return [*lines, ""]


FAMILIES = (("retrieval", "Retrieval"), ("lexical", "Generation: lexical"),
            ("semantic", "Generation: semantic"), ("judge", "Judge"))


def render() -> tuple[str, list[str]]:
    """The page, and the problems that stop it from being written."""
    found, problems = entries()
    for entry in found:
        reference = REFERENCES.get(entry.key)
        if reference is None:
            problems.append(f"metric '{entry.name}' has no entry in REFERENCES of "
                            f"scripts/make_metrics_doc.py (key {entry.key!r})")
            continue
        problems += [f"metric '{entry.name}': test {test} does not exist"
                     for test in missing_tests(reference)]
    if problems:
        return "", sorted(set(problems))
    families = [family for family, _ in FAMILIES]
    order = {family: i for i, family in enumerate(families)}
    found.sort(key=lambda e: (order.get(e.cls.family, len(order)), _order_key(e)))
    index = [f"| [`{e.name}`](#{_anchor(e.name)}) | {e.cls.family} | "
             f"{REFERENCES[e.key].implementation} |" for e in found]
    body: list[str] = []
    titles = dict(FAMILIES)
    for family in [*families, *sorted({e.cls.family for e in found} - set(families))]:
        members = [e for e in found if e.cls.family == family]
        if members:
            body += [f"## {titles.get(family, family)}", ""]
            for entry in members:
                body += _section(entry, REFERENCES[entry.key])
    return HEADER + "\n".join(index) + "\n\n" + "\n".join(body).rstrip() + "\n", []


def _order_key(entry: Entry) -> tuple[int, str]:
    # Registered names first (alphabetically), then families, then namespaced names in the
    # order their namespace lists them.
    return (1 if ":" in entry.name else 0, "" if ":" in entry.name else entry.name.lower())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when docs/metrics.md is not what this "
                        "script writes")
    args = parser.parse_args(argv)
    text, problems = render()
    if problems:
        for problem in problems:
            print(f"make_metrics_doc: {problem}", file=sys.stderr)
        return 1
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current == text:
            return 0
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(),
                                    "docs/metrics.md (as it is)", "docs/metrics.md (as written)",
                                    lineterm="", n=1)
        print("make_metrics_doc: docs/metrics.md is stale; run python "
              "scripts/make_metrics_doc.py", file=sys.stderr)
        print("\n".join(list(diff)[:60]), file=sys.stderr)
        return 1
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
