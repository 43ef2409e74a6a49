"""The report's per-record table: one row per record id across all runs.

Query, answer and reference come from the records files when they could be read; then one score
cell per run and headline metric (shaded within its column's range), the judge's reasoning,
claim-level details when a run has them (drawn by :mod:`~rageval.report.html.claims`) and the
reasons a record went unscored. The table sorts and filters in the browser
(``assets/report.js``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping

from rageval.core.records import Record
from rageval.core.results import RecordResult
from rageval.core.results.counts import count_of, unit_values
from rageval.report.html.claims import LEGEND, claims_cell, has_claim_details
from rageval.report.html.data import ReportRun, as_finite, scored_values, value_span
from rageval.report.html.markup import clip, esc, fmt_number, num_cell, run_label, table, th


def records_section(runs: list[ReportRun], metrics: list[str]) -> str:
    ids = list(dict.fromkeys(result.id for run in runs for result in run.results.records))
    text_columns = _text_columns(runs)
    score_columns = [(run, metric) for metric in metrics for run in runs
                     if metric in run.results.summary]
    ranges = {column: _column_range(*column) for column in score_columns}
    has_reasoning = any(_reasonings(run, result) or _flags(result)
                        for run in runs for result in run.results)
    has_claims = has_claim_details(runs)
    has_errors = any(result.errors for run in runs for result in run.results)
    several = len(runs) > 1

    head = [th("id", key="id", kind="text")]
    head += [th(label, key=key, kind="text") for key, label, _ in text_columns]
    for run, metric in score_columns:
        label = esc(metric) + (f'<span class="sub">{run_label(run)}</span>' if several else "")
        key = f"{run.name}:{metric}" if several else metric
        head.append(th(label, key=key, kind="num", numeric=True,
                       title=run.results.summary[metric].signature))
        if _labelled(run, metric):
            head.append(th(f'human<span class="sub">{esc(metric)}</span>',
                           key=f"{key}:human", kind="num", numeric=True,
                           title="the human labels of the labels file: their mean, then "
                                 "each annotator's"))
    if has_reasoning:
        head.append(th("judge reasoning", key="reasoning", kind="text"))
    if has_claims:
        head.append(th("claims", key="claims", kind="text", title=LEGEND))
    if has_errors:
        head.append(th("unscored / errors", key="errors", kind="text"))

    wholes = _Conversations(runs, metrics)
    rows = []
    for record_id in ids:
        cells = [f'<td class="id">{esc(record_id)}</td>']
        turns = wholes.turns(record_id)
        if turns is not None and text_columns:  # a conversation's own line: no text of its own
            cells.append(f'<td class="muted" data-s="">the conversation as a whole '
                         f"({count_of(turns, 'turn')})</td>")
            cells += ['<td class="null" data-s=""></td>'] * (len(text_columns) - 1)
        else:
            cells += [_text_cell(getter(record_id)) for _, _, getter in text_columns]
        for run, metric in score_columns:
            cells.append(_score_cell(run, record_id, metric, ranges[(run, metric)], wholes))
            if _labelled(run, metric):
                cells.append(_labels_cell(run, record_id, metric))
        if has_reasoning:
            cells.append(_reasoning_cell(runs, record_id))
        if has_claims:
            cells.append(claims_cell(runs, record_id))
        if has_errors:
            cells.append(_errors_cell(runs, record_id))
        rows.append(f"<tr>{''.join(cells)}</tr>\n")

    missing = [run.name for run in runs if run.records is None]
    note = ""
    if missing and text_columns:
        note = ('<p class="note">Queries and answers are missing for '
                + ", ".join(esc(name) for name in missing)
                + ": its records file could not be found.</p>")
    elif missing:
        note = ('<p class="note">The records files could not be found, so queries and answers '
                "are not shown: ids, scores and judge reasoning only.</p>")
    note += _labels_notes(runs)
    toolbar = ('<div class="toolbar"><input type="search" id="records-filter" '
               'placeholder="Filter records (id, text, reasoning, …)" aria-label="filter records">'
               f'<span id="records-count" class="muted">{count_of(len(ids), "row")}</span>'
               '<span class="muted">Click a header to sort (unscored last); click a long text '
               "to expand it.</span></div>")
    return (f'<section id="records"><h2>Records</h2>{note}{toolbar}'
            + table("records-table", head, rows, tall=True) + "</section>")


_TextGetter = Callable[[str], str | None]


def _text_columns(runs: list[ReportRun]) -> list[tuple[str, str, _TextGetter]]:
    """Query, answer and reference columns, for the runs whose records could be read.

    Query and reference come from the first run that has the record (runs compared on the same
    questions share them); answers get one column per run when any of them differ.
    """
    with_records = [run for run in runs if run.records is not None]
    if not with_records:
        return []

    def first(field: Callable[[Record], str | None]) -> _TextGetter:
        def get(record_id: str) -> str | None:
            for run in with_records:
                record = run.records.get(record_id) if run.records is not None else None
                if record is not None and field(record):
                    return field(record)
            return None
        return get

    def answer_of(run: ReportRun) -> _TextGetter:
        def get(record_id: str) -> str | None:
            record = run.records.get(record_id) if run.records is not None else None
            return None if record is None else record.answer
        return get

    columns: list[tuple[str, str, _TextGetter]] = [
        ("query", "query", first(lambda r: r.query))]
    if _answers_differ(with_records):
        columns += [(f"answer:{run.name}", f'answer<span class="sub">{run_label(run)}</span>',
                     answer_of(run)) for run in with_records]
    else:
        columns.append(("answer", "answer", first(lambda r: r.answer)))
    if any(record.references for run in with_records for record in _values(run.records)):
        columns.append(("reference", "reference", first(_joined_references)))
    return columns


def _values(records: Mapping[str, Record] | None) -> Iterable[Record]:
    return () if records is None else records.values()


def _joined_references(record: Record) -> str | None:
    return "\n—\n".join(record.references) if record.references else None


def _answers_differ(runs: list[ReportRun]) -> bool:
    if len(runs) < 2:
        return False
    first = runs[0].records or {}
    return any(first.get(record_id) is None or first[record_id].answer != record.answer
               for run in runs[1:] for record_id, record in _items(run.records))


def _items(records: Mapping[str, Record] | None) -> Iterable[tuple[str, Record]]:
    return () if records is None else records.items()


def _text_cell(text: str | None) -> str:
    if not text:
        return '<td class="null" data-s="">—</td>'
    return f"<td>{clip(esc(text))}</td>"


def _column_range(run: ReportRun, metric: str) -> tuple[float, float]:
    scores = scored_values(run, metric)
    if not scores.size:
        return (0.0, 1.0)
    span = value_span(run.results.summary[metric].scale, [float(v) for v in scores])
    if span is not None:  # shaded within the metric's scale (a 3 of 5 fills three fifths)
        return span
    low, high = float(scores.min()), float(scores.max())
    return (min(low, 0.0), high) if low >= 0 else (low, high)


class _Conversations:
    """The conversations' own lines of each run (the values that grade a conversation whole),
    and what their rows show for a value scored per turn: the mean of the scored turns, the
    conversation's value in the run's summary."""

    def __init__(self, runs: list[ReportRun], metrics: list[str]) -> None:
        self._turns: dict[str, int] = {}
        self._means: dict[tuple[int, str], dict[str, tuple[float, int]]] = {}
        for index, run in enumerate(runs):
            if not isinstance(run.results.manifest.get("conversations"), Mapping):
                continue
            counted = Counter(r.conversation for r in run.results.records
                              if r.conversation is not None and r.turn is not None)
            for result in run.results.records:
                if result.conversation is not None and result.turn is None:
                    self._turns.setdefault(result.id, counted[result.conversation])
            for metric in metrics:
                self._means[(index, metric)] = unit_values(run.results.records, metric)
        self._index = {id(run): index for index, run in enumerate(runs)}

    def turns(self, record_id: str) -> int | None:
        """The turns of the conversation whose own line this is; None: not such a line."""
        return self._turns.get(record_id)

    def mean(self, run: ReportRun, record_id: str, metric: str) -> tuple[float, int] | None:
        """A conversation's mean of its scored turns and their number, on its own line."""
        if record_id not in self._turns:
            return None
        return self._means.get((self._index[id(run)], metric), {}).get(record_id)


def _score_cell(run: ReportRun, record_id: str, metric: str, bounds: tuple[float, float],
                wholes: _Conversations) -> str:
    result = run.by_id.get(record_id)
    if result is None:
        return '<td class="num null" data-v="" title="not in this run">·</td>'
    value = as_finite(result.scores.get(metric))
    title = None
    if value is None and (mean := wholes.mean(run, record_id, metric)) is not None:
        value, title = mean[0], f"the mean of its {count_of(mean[1], 'scored turn')}"
    if value is None:
        reason = result.errors.get(metric) or "unscored"
        return f'<td class="num null" data-v="" title="{esc(reason)}">—</td>'
    low, high = bounds
    share = 0.0 if high <= low else min(max((value - low) / (high - low), 0.0), 1.0)
    extra = "score" if title is None else "score mean"
    return num_cell(value, extra_class=extra, style=f"--p:{share:.3f}", title=title)


def _labels_notes(runs: list[ReportRun]) -> str:
    """Why a run's human labels are missing or differ from those it was calibrated by: said
    on the page, so that a column does not vanish (or mislead) silently."""
    several = len(runs) > 1
    return "".join(f'<p class="note labels-note">{f"{run_label(run)}: " if several else ""}'
                   f"{esc(run.labels_note)}</p>" for run in runs if run.labels_note)


def _labelled(run: ReportRun, metric: str) -> bool:
    return run.labels is not None and metric in run.labels


def _labels_cell(run: ReportRun, record_id: str, metric: str) -> str:
    """A record's human labels of a metric beside the judge's value: their mean, then each
    annotator's label."""
    given = (run.labels or {}).get(metric, {}).get(record_id)
    if not given:
        return '<td class="num null" data-v="" title="no human label">—</td>'
    mean = sum(given.values()) / len(given)
    each = ", ".join(f"{who} {fmt_number(label)}" for who, label in sorted(given.items()))
    return (f'<td class="num human" data-v="{mean!r}" title="{esc(each)}">'
            f'{esc(fmt_number(mean))}<span class="sub">{esc(each)}</span></td>')


def _reasonings(run: ReportRun, result: RecordResult) -> list[tuple[str, str]]:
    """(metric, reasoning) for each judge reply with reasoning in this record's details."""
    out = []
    for metric, detail in result.details.items():
        if isinstance(detail, Mapping) and isinstance(detail.get("reasoning"), str):
            out.append((metric, detail["reasoning"]))
    return out


def _flags(result: RecordResult) -> list[tuple[str, str, str]]:
    """(metric, flag, why) for each flag in this record's details (set by the judge's
    tampering rules)."""
    out = []
    for metric, detail in result.details.items():
        if not isinstance(detail, Mapping):
            continue
        reasons = detail.get("flag_reasons")
        for flag in detail.get("flags") or ():
            why = reasons.get(flag, "") if isinstance(reasons, Mapping) else ""
            out.append((metric, str(flag), str(why)))
    return out


Shown = tuple[ReportRun, RecordResult, str]


def _results(runs: list[ReportRun], record_id: str) -> Iterator[Shown]:
    """Each run's result for the record, with the run's name to show beside it (when there
    are several runs)."""
    for run in runs:
        result = run.by_id.get(record_id)
        if result is not None:
            yield run, result, f" · {esc(run.name)}" if len(runs) > 1 else ""


def _reasoning_cell(runs: list[ReportRun], record_id: str) -> str:
    parts = []
    for run, result, who in _results(runs, record_id):
        parts += [f'<div class="flag"><b>{esc(metric)}</b>{who} flagged {esc(flag)}: '
                  f"{esc(why)}</div>" for metric, flag, why in _flags(result)]
        for metric, reasoning in _reasonings(run, result):
            score = fmt_number(as_finite(result.scores.get(metric)))
            parts.append(f'<div class="reason"><b>{esc(metric)}</b>{who} '
                         f'<span class="muted">(score {esc(score)})</span>: {esc(reasoning)}</div>')
    if not parts:
        return '<td class="null" data-s="">—</td>'
    return f"<td>{clip(''.join(parts))}</td>"


def _errors_cell(runs: list[ReportRun], record_id: str) -> str:
    parts = []
    for _, result, who in _results(runs, record_id):
        parts += [f'<div class="error"><b>{esc(metric)}</b>{who}: {esc(reason)}</div>'
                  for metric, reason in result.errors.items()]
    if not parts:
        return '<td data-s=""></td>'
    return f"<td>{clip(''.join(parts))}</td>"
