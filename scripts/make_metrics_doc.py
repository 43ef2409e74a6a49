"""Write docs/metrics.md, the metric reference, from rageval's metric registry.

    python scripts/make_metrics_doc.py            # write docs/metrics.md
    python scripts/make_metrics_doc.py --check    # exit 1, with a diff, when the file is stale

Every metric the registry knows is listed: each registered class (``ndcg``, ``bleu``, ...),
each open-ended family (``rougeN``), and each metric of a name-prefixed namespace (the
built-in judge rubrics and ``judge:pairwise``, the ``claims:``, ``nuggets:`` and
``citations:`` metrics). For each: how it is written, its declared parameters, its reference
implementation, where its value and its signature are computed (read from the class with
``inspect``), and the tests that hold it.

This module's job: the entries from the registry, the page, and ``--check``. The reference
implementation and the tests come from ``REFERENCES`` in ``scripts/metrics_doc_references.py``,
keyed by the registered name, the family's pattern or the namespace; where the code is and
whether the named tests exist is found by ``scripts/metrics_doc_code.py``. A metric without an
entry, or an entry naming a test that does not exist, is an error that names it: the page is
not written and ``--check`` fails.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The checkout's rageval, not an installed one, and this script's sibling modules, however the
# script is run or loaded.
for _path in (ROOT, Path(__file__).resolve().parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from metrics_doc_code import _relative, missing_tests, signature_code, value_code  # noqa: E402
from metrics_doc_references import REFERENCES, Reference  # noqa: E402

from rageval.core import registry  # noqa: E402
from rageval.core.metric import Metric  # noqa: E402
from rageval.core.params import Param, render_value  # noqa: E402

PAGE = ROOT / "docs" / "metrics.md"


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
        if rubric.level == "conversation":
            per_context = (" (each whole conversation, on its own line: see "
                           "[Conversations](conversations.md#judging-whole-conversations))")
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


def _tool_entries() -> Iterator[Entry]:
    from rageval.tools.metric import KINDS, ToolCallMetric

    for kind, summary in KINDS.items():
        yield Entry(f"tools:{kind}", "tools:", ToolCallMetric, f"{summary[0].upper()}"
                    f"{summary[1:]} (0-1).", ToolCallMetric.params, ToolCallMetric.cutoff_rule)


#: How the metrics of each built-in namespace are listed.
NAMESPACES: dict[str, Callable[[], Iterator[Entry]]] = {
    "judge": _judge_entries,
    "claims": lambda: _claim_entries("claims"),
    "nuggets": lambda: _claim_entries("nuggets"),
    "citations": lambda: _claim_entries("citations"),
    "tools": _tool_entries,
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
            problems.append(f"metric namespace '{namespace}:' has no entry in NAMESPACES of "
                            "scripts/make_metrics_doc.py (and REFERENCES of "
                            "scripts/metrics_doc_references.py)")
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
[claims](claims.md), [tool calls](conversations.md#tool-calls); the name grammar:
[Metric names](#metric-names).

## Metric names

`name[(key=value,...)][@k]`: a base name, its parameters in parentheses, and a cutoff after
`@` where the metric takes one (`p@5`, `p(rel=2)@5`, `ndcg(gain=exp)@10`, `err(gmax=3)@10`).
Parameters left at their default are omitted from the canonical name, the one every output
uses. Judge and claim-level metrics are prefixed by their namespace (`judge:faithfulness`,
`claims:f1`, `nuggets:vital_strict(source=contexts)`, `tools:f1(match=name)`).

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
            ("semantic", "Generation: semantic"), ("judge", "Judge"), ("tools", "Tool calls"))


def render() -> tuple[str, list[str]]:
    """The page, and the problems that stop it from being written."""
    found, problems = entries()
    for entry in found:
        reference = REFERENCES.get(entry.key)
        if reference is None:
            problems.append(f"metric '{entry.name}' has no entry in REFERENCES of "
                            f"scripts/metrics_doc_references.py (key {entry.key!r})")
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
