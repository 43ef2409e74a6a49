"""The judge's rubrics as a terminal table, for ``rageval metrics``."""

from __future__ import annotations

from rich.table import Table

from rageval.judge.rubric.rubrics import list_rubrics, load_rubric

__all__ = ["claim_level_table", "rubrics_table"]

# One line per claim-level metric (the formulas and their sources are in each kind's card).
_CLAIM_LEVEL = {
    "claims:precision": "answer claims entailed by the reference",
    "claims:recall": "reference claims entailed by the answer",
    "claims:f1": "harmonic mean of claims:precision and claims:recall",
    "claims:claim_recall": "reference claims entailed by some retrieved context",
    "claims:context_precision": "retrieved contexts that entail some reference claim",
    "claims:context_utilization": "of the reference claims some context entails, those the "
                                  "answer entails",
    "claims:noise_sensitivity.relevant": "answer claims that are wrong and entailed by a "
                                         "relevant context",
    "claims:noise_sensitivity.irrelevant": "answer claims that are wrong and entailed only by "
                                           "irrelevant contexts",
    "claims:hallucination": "answer claims that are wrong and entailed by no context",
    "claims:self_knowledge": "answer claims that are right and entailed by no context",
    "claims:faithfulness": "answer claims entailed by some retrieved context",
    "nuggets:vital_strict": "vital nuggets the answer fully supports (TREC 2024 RAG headline)",
    "nuggets:vital": "vital nuggets supported, partial support counting 0.5",
    "nuggets:all_strict": "all nuggets the answer fully supports",
    "nuggets:all": "all nuggets supported, partial support counting 0.5",
    "citations:recall": "statements entailed by the passages they cite (ALCE)",
    "citations:precision": "citations needed to support their statements (ALCE)",
}


def rubrics_table(prompts_dir: str | None = None) -> Table:
    """The judge rubrics usable as ``judge:<name>``: scale, inputs and what each grades."""
    table = Table(title="judge rubrics (judge:<name>, or judge:<path to a .toml>)",
                  title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("scale")
    table.add_column("inputs")
    table.add_column("grades", overflow="fold")
    for name in list_rubrics(prompts_dir):
        if name == "pairwise":  # not a rubric: the pairwise prompt, listed below
            continue
        rubric = load_rubric(name, prompts_dir)
        where = "" if rubric.builtin else f" ({rubric.source})"
        per_context = " (each context)" if "context" in rubric.inputs else ""
        table.add_row(f"judge:{name}", f"{rubric.scale_min}-{rubric.scale_max}{per_context}",
                      ", ".join(rubric.inputs), rubric.description + where)
    table.add_row("judge:pairwise", "win 1, tie 0.5, loss 0",
                  "query, answer, --judge-against FILE's answer (contexts, reference if any)",
                  "Which of two answers is better, asked in both orders (a verdict that flips "
                  "when swapped is a tie); .win .tie .loss .consistent as components.")
    return table


def claim_level_table() -> Table:
    """The claim-level metrics (``claims:``, ``nuggets:``, ``citations:``): what each measures."""
    table = Table(title="claim-level judge metrics, 0-1 (nuggets take source=reference|contexts, "
                        "citations max_citations=N)", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("share of", overflow="fold")
    for name, text in _CLAIM_LEVEL.items():
        table.add_row(name, text)
    return table
