"""The records table's "claims" cell: claim-level details drawn as a compact, readable breakdown.

A record's ``details`` may hold, under ``claims``, ``nuggets`` and ``citations`` (or those names
followed by ``(params)``), the plain JSON that claim-level judging keeps: answer and reference
claims with their verdicts against the reference, the answer and each context; nuggets with their
importance and assignment; cited statements with their support. This module turns them into one
cell per record (one clipped part per run), with a word beside every mark so that the table's
filter, which matches cell text, finds "contradicted" or a context id.

The details are read as plain dicts on purpose: the report does not import the judge that wrote
them, and an entry of an unexpected shape is drawn as far as it goes instead of failing the page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rageval.report.html.data import ReportRun
from rageval.report.html.markup import clip, esc, run_label

KINDS = ("claims", "nuggets", "citations")
LEGEND = ("claim-level details: ✓ entailed / supported, ✗ contradicted / not supported, "
          "○ neutral, ◐ partial support, ? not checked")

# A verdict as drawn: its mark, the word shown beside it, and its CSS class (its colour).
_Mark = tuple[str, str, str]
_UNCHECKED: _Mark = ("?", "not checked", "v-none")
_ENTAILMENT: dict[str, _Mark] = {
    "entailment": ("✓", "entailed", "v-yes"),
    "neutral": ("○", "neutral", "v-neutral"),
    "contradiction": ("✗", "contradicted", "v-no"),
}
_ASSIGNMENT: dict[str, _Mark] = {
    "support": ("✓", "support", "v-yes"),
    "partial_support": ("◐", "partial", "v-partial"),
    "not_support": ("✗", "no support", "v-no"),
}
_Item = tuple[_Mark, str]  # a list entry: its mark (counted in the heading) and its HTML
_UNNEEDED = "supports nothing alone, and the statement holds without it"


def claim_details(details: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """``(kind, key, detail)`` for each claim-level detail of a record, in the record's order."""
    found = []
    for key, detail in details.items():
        kind = next((k for k in KINDS if key == k or key.startswith(f"{k}(")), None)
        if kind is not None and isinstance(detail, Mapping):
            found.append((kind, key, detail))
    return found


def has_claim_details(runs: Iterable[ReportRun]) -> bool:
    """Whether any record of any run has claim-level details (the column exists only then)."""
    return any(claim_details(result.details) for run in runs for result in run.results)


def claims_cell(runs: Sequence[ReportRun], record_id: str) -> str:
    """The record's cell: each run's details in its own clipped part, labelled when several."""
    parts = []
    for run in runs:
        result = run.by_id.get(record_id)
        found = [] if result is None else claim_details(result.details)
        if not found:
            continue
        label = f'<div class="claims-run">{run_label(run)}</div>' if len(runs) > 1 else ""
        parts.append(clip(label + "".join(_detail(kind, key, detail)
                                          for kind, key, detail in found)))
    if not parts:
        return '<td class="null" data-s="">—</td>'
    return f'<td class="claims">{"".join(parts)}</td>'


def _detail(kind: str, key: str, detail: Mapping[str, Any]) -> str:
    if kind == "claims":
        body = _claims(key, detail)
    elif kind == "nuggets":
        body = _nuggets(key, detail)
    else:
        body = _citations(key, detail)
    body += _errors(detail.get("errors"))
    # Say so rather than draw nothing: an empty part would look like a rendering fault.
    return body or f'<div class="claims-head muted">{esc(key)}: nothing recorded</div>'


# --------------------------------------------------------------------------------------------
# The three kinds
# --------------------------------------------------------------------------------------------


def _claims(key: str, detail: Mapping[str, Any]) -> str:
    order = _strings(detail.get("contexts"))
    sources = _mapping(detail.get("sources"))
    out = ""
    answer = _entries(detail.get("answer_claims"))
    if answer is not None:
        items = [_claim_item(claim, "reference", "against the reference", order)
                 for claim in answer]
        out += _section("answer claims", key, "claims", sources.get("answer_claims"), items)
    reference = _entries(detail.get("reference_claims"))
    if reference is not None:
        items = [_claim_item(claim, "answer", "entailed by the answer?", order)
                 for claim in reference]
        out += _section("reference claims", key, "claims", sources.get("reference_claims"), items)
    return out


def _claim_item(claim: Mapping[str, Any], field: str, meaning: str,
                order: list[str]) -> _Item:
    """A claim with its verdict from ``field`` and the contexts that entail it."""
    verdict = claim.get(field)
    mark = _UNCHECKED if verdict is None else _ENTAILMENT.get(
        str(verdict), ("?", str(verdict), "v-none"))
    return mark, (f"<li>{_mark_html(mark, meaning)} {_text(claim)} "
                  f'<span class="muted">— {_supporters(claim.get("contexts"), order)}</span></li>')


def _supporters(verdicts: Any, order: list[str]) -> str:
    """The contexts whose verdict is entailment, in rank order (the ranked list names it)."""
    if not isinstance(verdicts, Mapping):
        return "contexts not checked"
    entailing = [str(c) for c, verdict in verdicts.items() if verdict == "entailment"]
    ranked = [c for c in order if c in entailing] + [c for c in entailing if c not in order]
    return f"supported by {esc(', '.join(ranked))}" if ranked else "no context"


def _nuggets(key: str, detail: Mapping[str, Any]) -> str:
    nuggets = _entries(detail.get("nuggets"))
    if nuggets is None:
        return ""
    return _section("nuggets", key, "nuggets", detail.get("source"),
                    [_nugget_item(nugget) for nugget in nuggets])


def _nugget_item(nugget: Mapping[str, Any]) -> _Item:
    assignment = nugget.get("assignment")
    mark = (("?", "not assigned", "v-none") if assignment is None
            else _ASSIGNMENT.get(str(assignment), ("?", str(assignment), "v-none")))
    importance = nugget.get("importance")
    if importance is None:
        tag = '<span class="tag unrated">unrated</span>'
    else:
        css = "tag vital" if importance == "vital" else "tag"
        tag = f'<span class="{css}">{esc(importance)}</span>'
    return mark, f"<li>{_mark_html(mark, 'assignment')} {tag} {_text(nugget)}</li>"


def _citations(key: str, detail: Mapping[str, Any]) -> str:
    statements = _entries(detail.get("statements"))
    if statements is None:
        return ""
    return _section("cited statements", key, "citations", None,
                    [_statement_item(statement) for statement in statements])


def _statement_item(statement: Mapping[str, Any]) -> _Item:
    supported = statement.get("supported")
    # Compared by identity: a stray 1 or "false" in the file is no verdict.
    if supported is True:
        mark: _Mark = ("✓", "supported", "v-yes")
    elif supported is False:
        mark = ("✗", "not supported", "v-no")
    else:
        mark = _UNCHECKED
    return mark, (f"<li>{_mark_html(mark, 'supported by its citations?')} {_text(statement)} "
                  f'<span class="muted">— </span>{_cites(statement)}</li>')


def _cites(statement: Mapping[str, Any]) -> str:
    """The cited contexts, the unnecessary ones marked, then the invalid citations.

    A citation is unnecessary when it does not support the statement alone and the statement
    stays supported without it (ALCE's citation precision).
    """
    alone = _mapping(statement.get("alone"))
    without = _mapping(statement.get("without"))
    parts = []
    for cite in _strings(statement.get("cites")):
        if alone.get(cite) is False and without.get(cite) is True:
            parts.append(f'<span class="cite-unneeded" title="{_UNNEEDED}">'
                         f"{esc(cite)} (unnecessary)</span>")
        else:
            parts.append(esc(cite))
    text = f"cites {', '.join(parts)}" if parts else '<span class="muted">no citation</span>'
    invalid = _strings(statement.get("invalid"))
    if invalid:
        text += (f' <span class="cite-invalid" title="cites no context of the record">'
                 f"invalid: {esc(', '.join(invalid))}</span>")
    return text


# --------------------------------------------------------------------------------------------
# Shared pieces
# --------------------------------------------------------------------------------------------


def _section(title: str, key: str, kind: str, source: Any, items: list[_Item]) -> str:
    """A heading (count, verdicts counted, where the list came from) and the list itself."""
    counts = Counter(mark for mark, _ in items)
    tally = ", ".join(f"{count} {mark[1]}" for mark, count in counts.items())
    head = f"<b>{esc(title)}</b> · {len(items)}" + (f": {esc(tally)}" if tally else "")
    notes = [esc(key)] if key != kind else []
    if source is not None:
        notes.append(f"from the {esc(source)}")
    if notes:
        head += f' <span class="muted">({"; ".join(notes)})</span>'
    body = "".join(html for _, html in items)
    return (f'<div class="claims-head">{head}</div>'
            + (f'<ul class="claims-list">{body}</ul>' if body else ""))


def _errors(errors: Any) -> str:
    """The detail's errors on one muted line: why a list or a verdict is missing."""
    if not isinstance(errors, Mapping) or not errors:
        return ""
    text = "; ".join(f"{field}: {reason}" for field, reason in errors.items())
    return f'<div class="claims-errors">errors: {esc(text)}</div>'


def _mark_html(mark: _Mark, meaning: str) -> str:
    symbol, word, css = mark
    return f'<span class="mark {css}" title="{esc(meaning)}">{symbol} {esc(word)}</span>'


def _text(item: Mapping[str, Any]) -> str:
    text = item.get("text")
    return '<span class="muted">(no text)</span>' if text is None else esc(text)


def _entries(value: Any) -> list[Mapping[str, Any]] | None:
    """A list's object entries; None when the list itself is null (not made, or failed)."""
    if not isinstance(value, list):
        return None
    return [entry for entry in value if isinstance(entry, Mapping)]


def _strings(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
