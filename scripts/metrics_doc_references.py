"""The hand-kept data of docs/metrics.md: for each metric, its reference implementation and the
tests that hold it (:data:`REFERENCES`), read by ``scripts/make_metrics_doc.py``."""

from __future__ import annotations

from dataclasses import dataclass

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
    "tools:": Reference(
        "none: rageval's own definition; ragas 0.4.3 (`ToolCallF1`, `ToolCallAccuracy`) where "
        "the two coincide", (
            "tests/tools/test_ragas_oracle.py::test_f1_equals_ragas_tool_call_f1",
            "tests/tools/test_ragas_oracle.py::"
            "test_strict_accuracy_is_one_exactly_when_every_call_is_in_place",
            "tests/tools/test_ragas_oracle.py::"
            "test_any_order_accuracy_is_one_exactly_when_the_calls_agree"), (
            "tests/tools/test_tool_metrics.py::test_worked_example_extra_call",
            "tests/tools/test_tool_metrics.py::test_worked_example_order_and_arguments",
            "tests/tools/test_tool_metrics.py::test_pairing_invariants"),
        "Where the definitions differ is in docs/conversations.md (tool calls)."),
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
