"""trec_eval's output lines.

One line per value, ``name<TAB>topic<TAB>value`` with the name left-justified to 22
characters; with ``-q`` the values of each topic (topics in ``strcmp`` order) come first, then
the summary over topics (``all``). Counts print as integers, other values with 4 decimals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TextIO

import numpy as np

from rageval.retrieval.trec_eval.evaluation import MeasureResult, Options


def _fmt_double(value: float) -> str:
    if value != value:  # NaN: glibc prints the sign bit
        return f"{'-nan' if math.copysign(1.0, value) < 0 else 'nan':>6}"
    return f"{value:6.4f}"


def _fmt_long(value: float) -> str:
    if value != value or math.isinf(value):
        return _fmt_double(value)
    return str(int(value))  # C's (long) cast truncates toward zero


def write_results(
    qids: Sequence[str], results: list[MeasureResult], opts: Options, out: TextIO
) -> None:
    lines: list[str] = []
    zscores = opts.zscores_path is not None
    if opts.query_flag:
        _per_query_lines(qids, results, lines, zscores)
    if opts.summary_flag:
        _summary_lines(results, lines, zscores)
    out.write("".join(lines))


def _per_query_lines(qids: Sequence[str], results: list[MeasureResult], lines: list[str],
                     zscores: bool) -> None:
    """Each topic's lines, topic by topic: one %-template holds a topic's lines, filled from
    the columns (one per printed name) by C's formatting, which costs a fraction of formatting
    the values and the lines one by one."""
    template: list[str] = []
    fields: list[Sequence[object]] = []
    for res in results:
        kind = res.selected.measure.kind
        if kind in ("runid", "num_q", "gm"):
            continue
        prefix = "Z" if zscores and kind != "relstring" else ""
        names = [f"{prefix}{n:<22}\t".replace("%", "%%") for n in res.selected.names]
        if kind == "relstring":
            assert isinstance(res.per_query, list)
            template.append(f"{names[0]}%s\t'%s'\n")
            fields += [qids, res.per_query]
            continue
        assert isinstance(res.per_query, np.ndarray)
        as_long = kind == "long" and not zscores
        for name, values in zip(names, res.per_query.T, strict=True):
            spec, texts = _formatted(values, as_long)
            template.append(f"{name}%s\t{spec}\n")
            fields += [qids, texts]
    if template and qids:
        lines.append("".join(map("".join(template).__mod__, zip(*fields, strict=True))))


def _formatted(values: np.ndarray, as_long: bool) -> tuple[str, list[object]]:
    """One column's values and their %-format, as trec_eval prints them (see _fmt_long and
    _fmt_double)."""
    if not np.isfinite(values).all() or (as_long and np.abs(values).max(initial=0) >= 2**62):
        # NaN, infinities and counts beyond int64: the careful way
        fmt = _fmt_long if as_long else _fmt_double
        return "%s", [fmt(v) for v in values.tolist()]
    if as_long:
        return "%d", values.astype(np.int64).tolist()  # truncates toward zero
    return "%6.4f", values.tolist()


def _summary_lines(results: list[MeasureResult], lines: list[str], zscores: bool) -> None:
    for res in results:
        kind = res.selected.measure.kind
        if kind == "relstring":
            continue
        prefix = "Z" if zscores and kind != "runid" else ""
        for name, value in zip(res.selected.names, res.summary, strict=False):
            if kind == "runid":
                text = str(value)
            elif kind in ("long", "num_q") and not zscores:
                text = _fmt_long(float(value))
            else:
                text = _fmt_double(float(value))
            lines.append(f"{prefix}{name:<22}\tall\t{text}\n")
