"""The report's conversations: each conversation as a thread, turn after turn.

For a run of conversations, each conversation is drawn as its turns in order: the user's
message, the tool calls made, the assistant's answer (from the records file, when it could be
read), and each turn's headline scores in every run; the values that grade the conversation
whole head the thread. The first turn that fails a turn threshold (``--turn-threshold``, the
``first_failing`` of ``conversations.jsonl``) is marked, with the metric it fails. The threads
follow the first run's conversations; the other runs' scores pair by conversation and turn
position, as ``rageval compare`` pairs them.
"""

from __future__ import annotations

from typing import Any

from rageval.core.records import Record
from rageval.core.results import RecordResult
from rageval.report.html.data import ReportRun
from rageval.report.html.markup import esc, fmt_number, run_label

__all__ = ["threads_section"]

_MAX_THREADS = 200  # a long run shows its first conversations; the records table has them all


def threads_section(runs: list[ReportRun], metrics: list[str]) -> str:
    """The section (empty when the first run has no conversations)."""
    first = runs[0]
    rows = first.results.conversations()
    if not rows:
        return ""
    turns = [_turns_by_position(run) for run in runs]
    whole = [_own_lines(run) for run in runs]
    shown = rows[:_MAX_THREADS]
    threads = [_thread(row, runs, turns, whole, metrics) for row in shown]
    more = (f'<p class="note">The first {len(shown)} of {len(rows)} conversations; the records '
            "table below has every turn.</p>") if len(rows) > len(shown) else ""
    return ('<section id="conversations"><h2>Conversations</h2>'
            '<p class="muted">Each conversation turn by turn; a marked turn is the first to '
            "fail a turn threshold.</p>" + more + "".join(threads) + "</section>")


def _turns_by_position(run: ReportRun) -> dict[tuple[str, int], RecordResult]:
    return {(r.conversation, r.turn): r for r in run.results.records
            if r.conversation is not None and r.turn is not None}


def _own_lines(run: ReportRun) -> dict[str, RecordResult]:
    return {r.conversation: r for r in run.results.records
            if r.conversation is not None and r.turn is None}


def _thread(row: dict[str, Any], runs: list[ReportRun],
            turns: list[dict[tuple[str, int], RecordResult]],
            whole: list[dict[str, RecordResult]], metrics: list[str]) -> str:
    conversation = row["id"]
    failing = _first_failing(row)
    head = [f'<h3>{esc(conversation)} <span class="muted">{row["turns"]} turns</span></h3>']
    own = [(run, lines.get(conversation)) for run, lines in zip(runs, whole, strict=True)]
    scores = [_scores(run, line, list(line.scores)) for run, line in own if line is not None]
    if any(scores):
        head.append(f'<div class="whole">{"".join(scores)}</div>')
    body = []
    for position in range(1, row["turns"] + 1):
        records = [found.get((conversation, position)) for found in turns]
        base = records[0]
        mark = failing.get(position)
        classes = "turn failing" if mark else "turn"
        note = (f'<div class="fails">first failing turn: {esc(", ".join(mark))}</div>'
                if mark else "")
        text = _texts(runs[0], base)
        cells = "".join(_scores(run, result, metrics)
                        for run, result in zip(runs, records, strict=True))
        body.append(f'<div class="{classes}" data-turn="{position}">'
                    f'<div class="turn-no">turn {position}</div>{note}{text}'
                    f'<div class="turn-scores">{cells}</div></div>')
    return f'<article class="thread">{"".join(head)}{"".join(body)}</article>'


def _first_failing(row: dict[str, Any]) -> dict[int, list[str]]:
    """Turn position -> the metrics whose first failing turn it is."""
    out: dict[int, list[str]] = {}
    for name, summed in row["scores"].items():
        position = summed.get("first_failing")
        if position is not None:
            out.setdefault(position, []).append(name)
    return out


def _texts(run: ReportRun, result: RecordResult | None) -> str:
    record: Record | None = None
    if result is not None and run.records is not None:
        record = run.records.get(result.id)
    if record is None:
        return ""
    parts = []
    if record.query is not None:
        parts.append(f'<div class="user"><b>user</b> {esc(record.query)}</div>')
    for call in record.tool_calls or ():
        parts.append(f'<div class="tool"><b>tool</b> {esc(call.text())}</div>')
    if record.answer is not None:
        parts.append(f'<div class="assistant"><b>assistant</b> {esc(record.answer)}</div>')
    return "".join(parts)


def _scores(run: ReportRun, result: RecordResult | None, metrics: list[str]) -> str:
    if result is None:
        return ""
    shown = [f"{esc(name)} {fmt_number(result.scores.get(name))}" for name in metrics
             if name in result.scores]
    if not shown:
        return ""
    return f'<span class="scores">{run_label(run)} {" · ".join(shown)}</span>'
