"""The shape of one trace: its spans in start order, its root, each span's parent, whether a
span lies below another of a kind, and the spans below one. Every convention that makes records
of a trace's spans (OpenInference, the OpenTelemetry GenAI conventions) reads the tree alike."""

from __future__ import annotations

from collections.abc import Iterator

from rageval.inputs.traces.spans import Span

__all__ = ["below_kind", "by_start", "parent_span", "root_span", "subtree", "unit_spans"]


def unit_spans(spans: list[Span], unit: str) -> Iterator[tuple[Span, list[Span], str]]:
    """Each unit of one trace, as ``(its root span, its spans in start order, "trace" or
    "span")``: the whole trace when ``unit`` is ``trace``, else each span of kind ``unit``
    without an ancestor of that kind, with the spans below it."""
    ordered = sorted(spans, key=by_start)  # a stable sort: spans starting together in file order
    if unit == "trace":
        yield root_span(ordered), ordered, "trace"
        return
    children: dict[str, list[Span]] = {}
    by_id = {span.span_id: span for span in ordered}
    for span in ordered:
        if span.parent_id is not None and span.parent_id in by_id:
            children.setdefault(span.parent_id, []).append(span)
    below = below_kind(ordered, by_id, unit)
    for span in ordered:
        if span.kind == unit and not below[span.span_id]:
            yield span, subtree(span, children), "span"


def by_start(span: Span) -> int:
    """The key that sorts spans in start order."""
    return span.start


def root_span(ordered: list[Span]) -> Span:
    """The span without a parent in the trace (the first to start, if several)."""
    ids = {span.span_id for span in ordered}
    for span in ordered:
        if span.parent_id is None or span.parent_id not in ids:
            return span
    return ordered[0]


def parent_span(span: Span, by_id: dict[str, Span]) -> Span | None:
    """The span's parent in the trace (None: a root, or a parent the trace lacks)."""
    return by_id.get(span.parent_id or "")


def below_kind(ordered: list[Span], by_id: dict[str, Span], kind: str) -> dict[str, bool]:
    """For each span, whether some other span of ``kind`` is among its ancestors.

    Each span's parent is looked up once: a walk up from a span stops at the first ancestor
    already answered, and answers every span it passed on the way back down, so a chain of
    ``n`` spans costs ``O(n)`` (walking each span's ancestors anew cost ``O(n**2)``). A
    parent cycle (malformed input) is answered as the walk up would: a span on it is below
    ``kind`` when another span of the cycle has that kind.
    """
    below: dict[str, bool] = {}
    marked: dict[str, bool] = {}  # the span itself or one of its ancestors has the kind
    for start in ordered:
        path: list[Span] = []
        on_path: dict[str, int] = {}
        span: Span | None = start
        while span is not None and span.span_id not in marked:
            if span.span_id in on_path:  # a cycle: every span of it sees every other
                cycle = path[on_path[span.span_id]:]
                hits = sum(s.kind == kind for s in cycle)
                for member in cycle:
                    below[member.span_id] = hits - (member.kind == kind) > 0
                    marked[member.span_id] = hits > 0
                del path[on_path[span.span_id]:]
                break
            on_path[span.span_id] = len(path)
            path.append(span)
            span = parent_span(span, by_id)
        above = False if span is None else marked[span.span_id]
        for member in reversed(path):
            below[member.span_id] = above
            above = above or member.kind == kind
            marked[member.span_id] = above
    return below


def subtree(root: Span, children: dict[str, list[Span]]) -> list[Span]:
    """``root`` and every span below it (``children``: span id -> its children), in start
    order; a span met twice (a parent cycle) is taken once."""
    out, stack, seen = [], [root], set()
    while stack:
        span = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        out.append(span)
        stack.extend(children.get(span.span_id, ()))
    return sorted(out, key=by_start)
