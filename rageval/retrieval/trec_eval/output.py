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
    columns = []
    for res in results:
        kind = res.selected.measure.kind
        if kind in ("runid", "num_q", "gm"):
            continue
        prefix = "Z" if zscores and kind != "relstring" else ""
        names = [f"{prefix}{n:<22}\t" for n in res.selected.names]
        if kind == "relstring":
            assert isinstance(res.per_query, list)
            columns.append((names, "relstring", res.per_query))
        else:
            assert isinstance(res.per_query, np.ndarray)
            columns.append((names, kind, res.per_query.tolist()))
    for qi, qid in enumerate(qids):
        tab_q = f"{qid}\t"
        for names, kind, data in columns:
            if kind == "relstring":
                lines.append(f"{names[0]}{tab_q}'{data[qi]}'\n")
                continue
            fmt = _fmt_long if kind == "long" and not zscores else _fmt_double
            row = data[qi]
            for name, value in zip(names, row, strict=True):
                lines.append(f"{name}{tab_q}{fmt(value)}\n")


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
