"""The house rules, read from the source with ``ast``: no import circles, lower floors never
import higher ones, a family never imports another family, the orchestrator names no family,
the judge's rooms reach only down, and no function is over 80 lines (docstrings aside).

Modules are not capped by length nor folders by count: a module is one idea, said in its
docstring, whatever its length."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rageval"

# The metric families: each imports only the core and itself.
FAMILIES = ("retrieval", "generation", "judge", "tools")
# What each part of the house may import (besides itself); a part not listed here may import
# everything (the command line, the public ``evaluate``, the package's lazy ``__init__``).
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    # The statistics every run's summary and every comparison rests on.
    "stats": {"core"},
    # A family may use the statistics (a judge panel's agreement), never another family.
    **{family: {"core", "stats"} for family in FAMILIES},
    "compare": {"core", "stats"},
    "report": {"core", "compare"},
    # The orchestrator receives a run's inputs whole (inputs.run.RunInputs) and reads them.
    "orchestrator": {"core", "stats", "engine", "inputs", "summary"},
    # Execution keeps the summary's parts as the batches finish.
    "engine": {"core", "stats", "summary"},
    "summary": {"core", "stats"},
    # The judge's options are declared beside its configuration (judge.llm.config).
    "config": {"core", "judge"},
    # Readers of other tools' formats use the TREC run and qrels readers of the retrieval family.
    "inputs": {"core", "retrieval"},
    "gate": {"core", "stats", "compare", "report"},
    # Scores back to the Phoenix spans records came from (read again from their traces).
    "phoenix": {"core", "inputs"},
    # A run logged to MLflow (its gate's comparison and summary table with it), and rageval's
    # metrics as MLflow scorers, scored through the public evaluate (api) with the judge's
    # options.
    "mlflow": {"core", "gate", "api", "judge"},
    # A run's values as OpenTelemetry evaluation events, on the spans of the traces its records
    # were read from.
    "otel": {"core", "inputs"},
    # Human labels of a judged run: its records, the rubric it was judged by, the draw.
    "annotate": {"core", "stats", "judge", "inputs"},
}
FAMILY_WORDS = re.compile(r"\b(judge|retrieval|generation|bleu|rouge|bertscore|kernels)\w*",
                          re.IGNORECASE)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(path: Path, name: str, known: Mapping[str, Path]) -> set[str]:
    """The rageval modules a file imports anywhere in it (top level, functions, type-checking
    blocks): ``from a.b import c`` counts as ``a.b.c`` when that is a module, else ``a.b``."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "rageval")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] != "rageval":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    out.discard(name)
    return {m for m in out if m in known}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(path, name, known) for name, path in known.items()}


def find_circle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One import circle (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def part(module: str) -> str:
    """``rageval.judge.rubric.metric`` -> ``judge``; ``rageval.orchestrator`` ->
    ``orchestrator``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else ""


def upward_arrows(edges: Mapping[str, Iterable[str]]) -> list[str]:
    bad = []
    for source, targets in edges.items():
        allowed = ALLOWED.get(part(source))
        if allowed is None:
            continue
        bad += [f"{source} -> {t}" for t in sorted(targets)
                if part(t) != part(source) and part(t) not in allowed]
    return bad


def test_no_import_circles() -> None:
    assert find_circle(graph()) is None


def test_the_circle_finder_finds_circles() -> None:
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_upward_arrows_and_no_family_imports_another() -> None:
    assert upward_arrows(graph()) == []


def test_the_layer_check_catches_a_family_importing_another() -> None:
    edges = {"rageval.compare.runs.compare": {"rageval.generation.bleu"},
             "rageval.core.records": {"rageval.judge.rubric.metric"},
             "rageval.judge.rubric.metric": {"rageval.core.metric"}}
    assert upward_arrows(edges) == ["rageval.compare.runs.compare -> rageval.generation.bleu",
                                    "rageval.core.records -> rageval.judge.rubric.metric"]


def test_every_module_is_in_a_known_part_of_the_house() -> None:
    parts = {part(name) for name in modules()}
    assert parts <= {"", "api", "cli", "pytest_plugin", *ALLOWED}


def test_only_the_registry_imports_by_name_and_only_known_modules() -> None:
    """``importlib.import_module`` is invisible to the graph above: the registry alone uses it
    on rageval's modules (to load the built-in families, the one sanctioned arrow from the core
    up) besides the package's lazy ``__init__``, and each module they name exists. BERTScore
    uses it on its optional libraries only."""
    from rageval.core.registry import BUILTIN_MODULES

    dynamic = {name for name, path in modules().items()
               if re.search(r"\bimport_module\(|__import__\(", path.read_text(encoding="utf-8"))}
    # The package's lazy __init__ imports its public names' modules by name too: it sits above
    # every floor, and the modules it names must exist.
    assert dynamic == {"rageval.core.registry", "rageval.generation.bertscore.dependencies",
                       "rageval", "rageval.cli.parser"}
    import rageval

    assert set(rageval._PUBLIC.values()) <= set(modules())
    # The command line imports each command's entry by name when the command runs.
    from rageval.cli.parser import CommandHandler, build_parser

    subcommands = next(a for a in build_parser()._actions
                       if isinstance(a, argparse._SubParsersAction))
    # trec-eval is read by its own parser before this one (its options are trec_eval's).
    handlers = [p.get_default("handler") for name, p in subcommands.choices.items()
                if name != "trec-eval"]
    assert handlers and all(isinstance(h, CommandHandler) for h in handlers)
    for handler in handlers:
        assert handler.module in modules()
        assert callable(getattr(importlib.import_module(handler.module), handler.name))
    assert set(BUILTIN_MODULES) <= set(modules())
    assert {part(m) for m in BUILTIN_MODULES} <= set(FAMILIES)


def test_the_orchestrator_names_no_family() -> None:
    source = (PACKAGE / "orchestrator.py").read_text(encoding="utf-8")
    assert FAMILY_WORDS.findall(source) == []


MAX_FUNCTION_LINES = 80


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's length in lines: its body from the first statement after the docstring to
    its last line (the signature, decorators and docstring aside)."""
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return (node.end_lineno or node.lineno) - body[0].lineno + 1


def long_functions(source: str, module: str) -> dict[str, int]:
    """The functions (methods and nested functions too) of a module's source that run past
    ``MAX_FUNCTION_LINES``, by dotted name, with their lengths."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef) and body_lines(child) > MAX_FUNCTION_LINES:
                    out[name] = body_lines(child)
                visit(child, name)
            else:
                visit(child, prefix)

    visit(ast.parse(source), module)
    return out


def all_long_functions() -> dict[str, int]:
    found: dict[str, int] = {}
    for name, path in modules().items():
        found.update(long_functions(path.read_text(encoding="utf-8"), name))
    return found


def test_no_function_is_over_80_lines() -> None:
    assert all_long_functions() == {}


def test_the_function_length_check_counts_the_body_without_its_docstring() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    docstring = '    """Says what it does,\n\n    at length."""\n'
    fits = f"def fits(\n    a: int,\n) -> None:\n{docstring}{body}"
    method = f"def long(self) -> None:\n{body}    y = 0\n"
    long = f"class Holder:\n{textwrap.indent(method, '    ')}"
    assert long_functions(fits, "m") == {}
    assert long_functions(long, "m") == {"m.Holder.long": MAX_FUNCTION_LINES + 1}



# The judge's rooms, by floor: a room imports only from itself and the rooms on lower floors
# (two rooms on one floor are siblings and never reach into each other). The judge package's
# own modules (registration, catalog) sit above them all.
JUDGE_FLOORS = {"prompting": 0, "local": 0, "llm": 1, "rubric": 2, "claims": 2, "pairwise": 3,
                "panel": 3}


def judge_room(module: str) -> str | None:
    """``rageval.judge.llm.cache.store`` -> ``llm``; None for the judge package's own
    modules."""
    pieces = module.split(".")
    return pieces[2] if len(pieces) > 3 else None


def judge_reaches(edges: Mapping[str, Iterable[str]]) -> list[str]:
    """The judge's arrows from a room to a sibling or to a room on a higher floor."""
    bad = []
    for source, targets in edges.items():
        room = judge_room(source) if source.startswith("rageval.judge.") else None
        if room is None:
            continue
        for target in sorted(targets):
            if not target.startswith("rageval.judge."):
                continue
            other = judge_room(target)
            if other != room and (other is None or JUDGE_FLOORS[other] >= JUDGE_FLOORS[room]):
                bad.append(f"{source} -> {target}")
    return bad


def test_every_judge_room_has_a_floor() -> None:
    rooms = {judge_room(m) for m in modules() if m.startswith("rageval.judge.")}
    assert rooms - {None} == set(JUDGE_FLOORS)


def test_no_judge_room_reaches_into_a_sibling_or_up() -> None:
    assert judge_reaches(graph()) == []


def test_the_judge_room_check_catches_a_sibling_and_an_arrow_up() -> None:
    edges = {"rageval.judge.claims.hooks": {"rageval.judge.rubric.hooks",
                                            "rageval.judge.llm.checks"},
             "rageval.judge.llm.transport.client": {"rageval.judge.rubric.metric",
                                          "rageval.judge.local.state"},
             "rageval.judge.pairwise.metric": {"rageval.judge.rubric.metric"},
             "rageval.judge.rubric.metric": {"rageval.judge.registration"}}
    assert judge_reaches(edges) == ["rageval.judge.claims.hooks -> rageval.judge.rubric.hooks",
                                    "rageval.judge.llm.transport.client -> "
                                    "rageval.judge.rubric.metric",
                                    "rageval.judge.rubric.metric -> rageval.judge.registration"]
