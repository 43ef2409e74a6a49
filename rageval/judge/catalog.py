"""The judge's rubrics as a terminal table, for ``rageval metrics``."""

from __future__ import annotations

from rich.table import Table

from rageval.judge.prompts import list_rubrics, load_rubric

__all__ = ["rubrics_table"]


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
