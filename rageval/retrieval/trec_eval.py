"""``rageval trec-eval``: a drop-in for trec_eval 10.0 with byte-identical output.

Usage::

    rageval trec-eval [-q] [-c] [-n] [-M N] [-l N] [-J] [-N N] [-m MEASURE[.PARAMS]]... QRELS RUN

The measures, their names, nicknames (``official``, ``set``, ``all_trec``), parameter syntax
(``-m P.5,10``, ``-m ndcg_cut.10``, ``-m relstring.20``, ``-m ndcg.1=3,2=7``), defaults,
output order and number formatting are trec_eval's; see :data:`MEASURES`. Every per-query
value comes from :mod:`rageval.retrieval.kernels`.

Output: one line per value, ``name<TAB>topic<TAB>value`` with the name left-justified to 22
characters; with ``-q`` the values of each topic (topics in ``strcmp`` order) come first, then
the summary over topics (``all``). Counts print as integers, other values with 4 decimals.
"""

from __future__ import annotations

import getopt
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TextIO

import numpy as np

from rageval.core.errors import RagevalError, UsageError
from rageval.retrieval import kernels as K
from rageval.retrieval.ranking import Ranking, fast_allocation
from rageval.retrieval.trec import read_qrels, read_run

__all__ = ["MEASURES", "NICKNAMES", "evaluate_files", "main"]

Kind = Literal["runid", "num_q", "long", "double", "gm", "cut_long", "cut_double", "p_double",
               "p_pair", "relstring"]

_LONG_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_RPREC_MULTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


@dataclass(frozen=True)
class _Ctx:
    """Evaluation settings a measure may depend on."""

    rel_level: int
    num_docs: int
    missing: np.ndarray  # bool [nq]: query absent from the run (only with -c)


Compute = Callable[[Ranking, _Ctx, tuple], np.ndarray]


@dataclass(frozen=True)
class Measure:
    """One trec_eval measure: how to compute, name, average and print it."""

    name: str
    kind: Kind
    doc: str
    compute: Compute | None = None
    default: tuple = ()


def _cut_each(fn: Callable[[Ranking, int, int], np.ndarray]) -> Compute:
    def compute(r: Ranking, ctx: _Ctx, cuts: tuple) -> np.ndarray:
        return np.stack([fn(r, int(k), ctx.rel_level) for k in cuts], axis=1)

    return compute


def _gains(pairs: tuple) -> dict[int, float]:
    """``level=gain`` parameters whose level is an integer (others, like ``p``, are ignored)."""
    out: dict[int, float] = {}
    for name, value in pairs:
        if re.fullmatch(r"[+-]?[0-9]+", name) and int(name) not in out:
            out[int(name)] = value
    return out


def _pair(pairs: tuple, key: str, default: float) -> float:
    value = default
    for name, v in pairs:
        if name == key:
            value = v
    return value


def _utility(r: Ranking, ctx: _Ctx, params: tuple) -> np.ndarray:
    if len(params) != 4:
        raise UsageError("utility needs exactly 4 coefficients (-m utility.a,b,c,d)")
    value = K.utility(r, params, ctx.num_docs, ctx.rel_level)
    value[ctx.missing] = 0.0  # trec_eval zeroes utility for a topic without results
    return value


def _ndcg(r: Ranking, ctx: _Ctx, pairs: tuple) -> np.ndarray:
    dcg, ideal = K.trec_dcg(r, _gains(pairs))
    return np.where(ideal > 0.0, K._safe_div(dcg, ideal), 0.0)


MEASURES: tuple[Measure, ...] = (
    Measure("runid", "runid", "Run name (runid field of the run's last line)."),
    Measure("num_q", "num_q", "Number of topics averaged over (with -c: topics of the qrels)."),
    Measure("num_ret", "long", "Retrieved documents (after -M); summary is the sum.",
            lambda r, c, p: K.num_ret(r)),
    Measure("num_rel", "long", "Relevant documents (grade >= -l); summary is the sum.",
            lambda r, c, p: K.num_rel(r, c.rel_level)),
    Measure("num_rel_ret", "long", "Relevant retrieved documents; summary is the sum.",
            lambda r, c, p: K.num_rel_ret(r, c.rel_level)),
    Measure("map", "double", "Mean average precision.",
            lambda r, c, p: K.average_precision(r, c.rel_level)),
    Measure("gm_map", "gm", "Average precision, geometric mean over topics (summary only).",
            lambda r, c, p: K.average_precision(r, c.rel_level)),
    Measure("Rprec", "double", "Precision after num_rel documents.",
            lambda r, c, p: K.r_precision(r, c.rel_level)),
    Measure("bpref", "double", "Binary preference (judged documents only).",
            lambda r, c, p: K.bpref(r, c.rel_level)),
    Measure("recip_rank", "double", "Reciprocal rank of the first relevant document.",
            lambda r, c, p: K.reciprocal_rank(r, c.rel_level)),
    Measure("iprec_at_recall", "cut_double", "Interpolated precision at recall levels.",
            lambda r, c, p: K.interpolated_precision_at_recall(r, p, c.rel_level),
            _RECALL_LEVELS),
    Measure("P", "cut_long", "Precision at cutoffs.", _cut_each(K.precision_at), _LONG_CUTS),
    Measure("relstring", "relstring", "Relevance values of the first N documents (per topic).",
            None, (10.0,)),
    Measure("recall", "cut_long", "Recall at cutoffs.", _cut_each(K.recall_at), _LONG_CUTS),
    Measure("infAP", "double", "Inferred average precision (sampled pools).",
            lambda r, c, p: K.infap(r, c.rel_level)),
    Measure("gm_bpref", "gm", "bpref, geometric mean over topics (summary only).",
            lambda r, c, p: K.bpref(r, c.rel_level)),
    Measure("Rprec_mult", "cut_double", "Precision at multiples of num_rel.",
            lambda r, c, p: np.stack([K.r_precision_mult(r, x, c.rel_level) for x in p], axis=1),
            _RPREC_MULTS),
    Measure("utility", "p_double", "Set utility a*relret + b*nonrelret + c*relmissed + d*rest.",
            _utility, (1.0, -1.0, 0.0, 0.0)),
    Measure("11pt_avg", "p_double", "Interpolated precision averaged over recall levels.",
            lambda r, c, p: K.eleven_point_average(r, p, c.rel_level), _RECALL_LEVELS),
    Measure("binG", "double", "Binary G (experimental).",
            lambda r, c, p: K.bin_g(r, c.rel_level)),
    Measure("G", "p_pair", "Normalized gain G (experimental).",
            lambda r, c, p: K.g_measure(r, _gains(p))),
    Measure("dcg", "p_pair", "Discounted cumulative gain.",
            lambda r, c, p: K.trec_dcg(r, _gains(p))[0]),
    Measure("ideal_dcg", "p_pair", "Ideal discounted cumulative gain.",
            lambda r, c, p: K.trec_dcg(r, _gains(p))[1]),
    Measure("ndcg", "p_pair", "Normalized DCG (gains default to the grades).", _ndcg),
    Measure("ndcg_rel", "p_pair", "nDCG averaged over relevant documents (experimental).",
            lambda r, c, p: K.ndcg_rel(r, _gains(p))),
    Measure("Rndcg", "p_pair", "nDCG averaged at R-levels (experimental).",
            lambda r, c, p: K.rndcg(r, _gains(p), c.rel_level)),
    Measure("ndcg_cut", "cut_long", "nDCG at cutoffs.",
            lambda r, c, p: np.stack([K.ndcg_at(r, int(k)) for k in p], axis=1), _LONG_CUTS),
    Measure("map_cut", "cut_long", "Average precision at cutoffs.",
            lambda r, c, p: np.stack(
                [K.average_precision(r, c.rel_level, int(k)) for k in p], axis=1),
            _LONG_CUTS),
    Measure("relative_P", "cut_long", "Precision at cutoffs relative to the best possible.",
            _cut_each(K.relative_precision_at), _LONG_CUTS),
    Measure("success", "cut_long", "A relevant document within the cutoff.",
            _cut_each(K.success_at), (1, 5, 10)),
    Measure("set_P", "double", "Precision of the retrieved set.",
            lambda r, c, p: K.set_precision(r, c.rel_level)),
    Measure("set_relative_P", "double", "Set precision relative to the best possible.",
            lambda r, c, p: K.set_relative_precision(r, c.rel_level)),
    Measure("set_recall", "double", "Recall of the retrieved set.",
            lambda r, c, p: K.set_recall(r, c.rel_level)),
    Measure("set_map", "double", "Set precision times set recall.",
            lambda r, c, p: K.set_map(r, c.rel_level)),
    Measure("set_F", "p_double", "Set F measure (x+1)PR/(xP+R), default x = 1.",
            lambda r, c, p: K.set_f(r, p[0], c.rel_level), (1.0,)),
    Measure("num_nonrel_judged_ret", "long", "Judged non-relevant retrieved documents (sum).",
            lambda r, c, p: K.num_nonrel_judged_ret(r, c.rel_level)),
    Measure("yaap", "double", "Yet another average precision (Robertson).",
            lambda r, c, p: K.yaap(r, c.rel_level)),
    Measure("rbp", "p_pair", "Rank-biased precision (default p=0.9).",
            lambda r, c, p: K.rbp(r, _pair(p, "p", 0.9), _gains(p))),
    Measure("rbp_resid", "p_pair", "Residual of rank-biased precision.",
            lambda r, c, p: K.rbp_residual(r, _pair(p, "p", 0.9))),
    Measure("unj", "cut_long", "Fraction of unjudged documents at cutoffs.",
            lambda r, c, p: np.stack([K.unjudged_at(r, int(k)) for k in p], axis=1), (5, 10, 20)),
)

_BY_NAME = {m.name: m for m in MEASURES}

# trec_eval measures that need rel_info/results formats rageval does not read.
_UNSUPPORTED = {
    "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp",
    "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
    "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp",
    "prefs_avgjg_imp", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg",
}

NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P",
            "set_recall", "set_relative_P", "set_map", "set_F"),
    "all_trec": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P", "relstring",
                 "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility",
                 "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut",
                 "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall",
                 "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret"),
}
_UNSUPPORTED_NICKNAMES = {"all_prefs", "prefs", "qrels_jg"}


# ==========================================================================================
# Measure selection and parameters (trec_eval's -m syntax)
# ==========================================================================================


@dataclass(frozen=True)
class _Selected:
    measure: Measure
    params: tuple
    names: tuple[str, ...]  # printed name of each value column


def _atol(text: str) -> int:
    m = re.match(r"\s*([+-]?[0-9]+)", text)
    return int(m.group(1)) if m else 0


def _atof(text: str) -> float:
    m = re.match(
        r"\s*([+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan))",
        text,
        re.IGNORECASE,
    )
    return float(m.group(1)) if m else 0.0


def _c_fixed(value: float, width: int = 3, prec: int = 2) -> str:
    return f"{value:{width}.{prec}f}"


def _parse_params(measure: Measure, text: str | None) -> tuple[tuple, str | None]:
    """(parameter values, printable parameter string or None for the defaults)."""
    if text is None:
        return measure.default, None
    kind = measure.kind
    if kind == "cut_long":
        cuts = sorted(_atol(t) for t in text.split(","))
        if cuts[0] <= 0:
            raise UsageError(f"measure '{measure.name}': cutoffs must be positive ('{text}')")
        if len(set(cuts)) != len(cuts):
            raise UsageError(f"measure '{measure.name}': duplicate cutoffs ('{text}')")
        return tuple(cuts), text
    if kind == "cut_double":
        vals = sorted(_atof(t) for t in text.split(","))
        if len(set(vals)) != len(vals):
            raise UsageError(f"measure '{measure.name}': duplicate cutoffs ('{text}')")
        return tuple(vals), text
    if kind in ("p_double", "relstring"):
        return tuple(_atof(t) for t in text.split(",")), text
    if kind == "p_pair":
        return _parse_pairs(measure.name, text), text
    raise UsageError(f"measure '{measure.name}' takes no parameters")


def _parse_pairs(name: str, text: str) -> tuple[tuple[str, float], ...]:
    last = ","
    for ch in text:
        if ch == ",":
            if last == ",":
                break
            last = ","
        elif ch == "=":
            if last == "=":
                last = ","
                break
            last = "="
    if last != "=":
        raise UsageError(f"measure '{name}': malformed name=value parameters '{text}'")
    pairs = []
    for item in text.split(","):
        key, _, value = item.partition("=")
        pairs.append((key, _atof(value)))
    return tuple(pairs)


def _column_names(measure: Measure, params: tuple, printable: str | None) -> tuple[str, ...]:
    name = measure.name
    if measure.kind == "cut_long":
        return tuple(f"{name}_{int(k)}" for k in params)
    if measure.kind == "cut_double":
        # trec_eval formats "%s_%3.2f" into a buffer of strlen(name) + 10 bytes.
        limit = len(name) + 9
        return tuple(f"{name}_{_c_fixed(x)}"[:limit] for x in params)
    if measure.kind in ("p_double", "p_pair", "relstring") and printable is not None:
        return (f"{name}_{printable}",)
    return (name,)


def select_measures(specs: Sequence[str]) -> list[_Selected]:
    """Resolve ``-m`` arguments into measures (in trec_eval's output order) with parameters.

    Raises UsageError for an unknown measure or nickname, malformed parameters, or a measure
    that needs input formats rageval does not read (preference judgments).
    """
    marked: set[str] = set()
    params_text: dict[str, str] = {}
    for spec in specs or ["official"]:
        base, dot, params = spec.partition(".")
        if dot:
            if not params:
                raise UsageError(f"improper measure parameters in '{spec}'")
            params_text.setdefault(base, params)  # the first parameters given win
        if base in NICKNAMES:
            marked.update(NICKNAMES[base])
        elif base in _BY_NAME:
            marked.add(base)
        elif base in _UNSUPPORTED or base in _UNSUPPORTED_NICKNAMES:
            raise UsageError(
                f"measure '{base}' needs preference or judgment-group files, which "
                "rageval trec-eval does not read"
            )
        else:
            raise UsageError(f"unknown measure '{spec}' (see 'rageval trec-eval -h')")
    selected = []
    for m in MEASURES:
        if m.name in marked:
            params, printable = _parse_params(m, params_text.get(m.name))
            selected.append(_Selected(m, params, _column_names(m, params, printable)))
    return selected


# ==========================================================================================
# Evaluation
# ==========================================================================================


@dataclass
class _Result:
    selected: _Selected
    per_query: np.ndarray | list[str] | None  # [nq, ncols] values, relstrings, or None
    summary: list[float | str]


def _evaluate(
    ranking: Ranking, selected: Sequence[_Selected], ctx: _Ctx
) -> list[_Result]:
    nq = ranking.num_queries
    results = []
    for sel in selected:
        m = sel.measure
        if m.kind == "runid":
            results.append(_Result(sel, None, [ranking.runid]))
            continue
        if m.kind == "num_q":
            results.append(_Result(sel, None, [float(nq)]))
            continue
        if m.kind == "relstring":
            length = int(sel.params[0]) if sel.params else 10
            results.append(_Result(sel, K.relstring(ranking, length), []))
            continue
        assert m.compute is not None
        values = np.asarray(m.compute(ranking, ctx, sel.params), dtype=np.float64)
        if values.ndim == 1:
            values = values[:, None]
        results.append(_Result(sel, values, _summarize(m.kind, values, nq)))
    return results


def _seq_total(column: np.ndarray) -> float:
    """Sum in query order, one addition at a time (trec_eval's accumulation)."""
    total = 0.0
    for v in column.tolist():
        total += v
    return total


def _summarize(kind: Kind, values: np.ndarray, nq: int) -> list[float | str]:
    out: list[float | str] = []
    for col in values.T:
        if kind == "long":
            out.append(_seq_total(col))
        elif kind == "gm":
            logs = np.array([math.log(max(v, K.MIN_GEO_MEAN)) for v in col.tolist()])
            out.append(math.exp(_seq_total(logs) / nq) if nq else 0.0)
        else:
            out.append(_seq_total(col) / nq if nq else 0.0)
    return out


def _judged_only(r: Ranking) -> Ranking:
    """trec_eval -J: drop retrieved documents that are not judged with a grade >= 0."""
    keep = r.te_rel() >= 0
    counts = np.bincount(r.segment_ids()[keep], minlength=r.num_queries)
    offsets = np.zeros(r.num_queries + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Ranking(
        qids=r.qids,
        offsets=offsets,
        grades=r.grades[keep],
        scores=None if r.scores is None else r.scores[keep],
        judged_offsets=r.judged_offsets,
        judged_grades=r.judged_grades,
        runid=r.runid,
    )


def _only_query(r: Ranking, qid: str) -> Ranking:
    """Restrict to one query (trec_eval's -D level.qid)."""
    if qid not in r.qids:
        raise UsageError(f"query '{qid}' is not evaluated")
    i = r.qids.index(qid)
    lo, hi = int(r.offsets[i]), int(r.offsets[i + 1])
    jlo, jhi = int(r.judged_offsets[i]), int(r.judged_offsets[i + 1])
    return Ranking(
        qids=(qid,),
        offsets=np.array([0, hi - lo], dtype=np.int64),
        grades=r.grades[lo:hi],
        scores=None if r.scores is None else r.scores[lo:hi],
        judged_offsets=np.array([0, jhi - jlo], dtype=np.int64),
        judged_grades=r.judged_grades[jlo:jhi],
        runid=r.runid,
        _pooled=None if r._pooled is None else r._pooled[lo:hi],
    )


@dataclass(frozen=True)
class _Options:
    query_flag: bool = False
    summary_flag: bool = True
    all_queries: bool = False
    judged_only: bool = False
    rel_level: int = 1
    max_retrieved: int | None = None
    num_docs: int = 0
    only_qid: str | None = None


def _run(
    qrels_path: str, run_path: str, specs: Sequence[str], opts: _Options
) -> tuple[Ranking, list[_Result]]:
    with fast_allocation():
        return _run_inner(qrels_path, run_path, specs, opts)


def _run_inner(
    qrels_path: str, run_path: str, specs: Sequence[str], opts: _Options
) -> tuple[Ranking, list[_Result]]:
    selected = select_measures(specs)
    qrels = read_qrels(qrels_path)
    run = read_run(run_path)
    ranking = Ranking.from_trec(
        qrels, run, max_retrieved=opts.max_retrieved, all_qrels_queries=opts.all_queries
    )
    # Topics of the qrels absent from the run (evaluated only with -c): trec_eval scores them
    # on a stand-in ranking and then zeroes the values that stand-in would distort.
    missing_names = set(ranking.qids) - set(run.qid_layout().names) if opts.all_queries else set()
    del run
    if opts.judged_only:
        ranking = _judged_only(ranking)
    if opts.only_qid is not None:
        ranking = _only_query(ranking, opts.only_qid)
    missing = np.array([q in missing_names for q in ranking.qids], dtype=bool)
    ctx = _Ctx(rel_level=opts.rel_level, num_docs=opts.num_docs, missing=missing)
    return ranking, _evaluate(ranking, selected, ctx)


def evaluate_files(
    qrels_path: str | os.PathLike[str],
    run_path: str | os.PathLike[str],
    measures: list[str],
    *,
    rel_level: int = 1,
    max_retrieved: int | None = None,
    all_queries: bool = False,
) -> dict[str, dict[str, float]]:
    """Evaluate a TREC run as ``trec_eval -q`` would, returning the values at full precision.

    ``measures`` use trec_eval's ``-m`` syntax (``"map"``, ``"P.10"``, ``"ndcg_cut.10"``,
    ``"official"``, ...). The result maps each topic id to ``{printed_name: value}`` (e.g.
    ``{"P_10": 0.3}``) for the values trec_eval prints per topic, and ``"all"`` to the summary
    values. Non-numeric values (``runid``, ``relstring``) are left out.
    Raises UsageError for an unknown measure, InputError for bad files.
    """
    opts = _Options(
        query_flag=True,
        rel_level=rel_level,
        max_retrieved=max_retrieved,
        all_queries=all_queries,
    )
    ranking, results = _run(os.fspath(qrels_path), os.fspath(run_path), measures, opts)
    out: dict[str, dict[str, float]] = {q: {} for q in ranking.qids}
    summary: dict[str, float] = {}
    for res in results:
        kind = res.selected.measure.kind
        names = res.selected.names
        if isinstance(res.per_query, np.ndarray) and kind != "gm":
            rows = res.per_query.tolist()
            for qid, row in zip(ranking.qids, rows, strict=True):
                out[qid].update(zip(names, row, strict=True))
        for name, value in zip(names, res.summary, strict=False):
            if isinstance(value, float):
                summary[name] = value
    out["all"] = summary
    return out


# ==========================================================================================
# Output
# ==========================================================================================


def _fmt_double(value: float) -> str:
    if value != value:  # NaN: glibc prints the sign bit
        return f"{'-nan' if math.copysign(1.0, value) < 0 else 'nan':>6}"
    return f"{value:6.4f}"


def _fmt_long(value: float) -> str:
    if value != value or math.isinf(value):
        return _fmt_double(value)
    return str(int(value))  # C's (long) cast truncates toward zero


def _write(ranking: Ranking, results: list[_Result], opts: _Options, out: TextIO) -> None:
    lines: list[str] = []
    if opts.query_flag:
        _per_query_lines(ranking, results, lines)
    if opts.summary_flag:
        _summary_lines(results, lines)
    out.write("".join(lines))


def _per_query_lines(ranking: Ranking, results: list[_Result], lines: list[str]) -> None:
    columns = []
    for res in results:
        kind = res.selected.measure.kind
        if kind in ("runid", "num_q", "gm"):
            continue
        names = [f"{n:<22}\t" for n in res.selected.names]
        if kind == "relstring":
            assert isinstance(res.per_query, list)
            columns.append((names, "relstring", res.per_query))
        else:
            assert isinstance(res.per_query, np.ndarray)
            columns.append((names, kind, res.per_query.tolist()))
    for qi, qid in enumerate(ranking.qids):
        tab_q = f"{qid}\t"
        for names, kind, data in columns:
            if kind == "relstring":
                lines.append(f"{names[0]}{tab_q}'{data[qi]}'\n")
                continue
            fmt = _fmt_long if kind == "long" else _fmt_double
            row = data[qi]
            for name, value in zip(names, row, strict=True):
                lines.append(f"{name}{tab_q}{fmt(value)}\n")


def _summary_lines(results: list[_Result], lines: list[str]) -> None:
    for res in results:
        kind = res.selected.measure.kind
        if kind == "relstring":
            continue
        for name, value in zip(res.selected.names, res.summary, strict=False):
            if kind == "runid":
                text = str(value)
            elif kind in ("long", "num_q"):
                text = _fmt_long(float(value))
            else:
                text = _fmt_double(float(value))
            lines.append(f"{name:<22}\tall\t{text}\n")


# ==========================================================================================
# Command line
# ==========================================================================================

USAGE = """\
usage: rageval trec-eval [-h] [-q] [-c] [-n] [-l N] [-M N] [-J] [-N N]
                         [-m MEASURE[.PARAMS]]... QRELS RUN
"""

HELP = USAGE + """
Evaluate a TREC run against TREC relevance judgments exactly as trec_eval 10.0 does, with
byte-identical output. RUN may be '-' to read the run from standard input.

options:
  -h, --help            show this help (with -m: also describe those measures) and exit
  -v, --version         print the version and exit
  -q                    also print the values of every topic, before the summary
  -m MEASURE[.PARAMS]   add a measure or a nickname; may be repeated. Parameters follow a
                        '.', comma separated: -m P.5,10  -m ndcg_cut.10  -m relstring.20
                        -m iprec_at_recall.0.5  -m ndcg.1=3,2=7 (grade=gain)  -m rbp.p=0.95
                        Nicknames: official (the default), set, all_trec.
  -c                    average over every topic of the qrels; topics without results count
                        as retrieving nothing (0 for most measures)
  -n                    do not print the summary
  -l N                  minimum grade of a relevant document (default 1)
  -M N                  evaluate only the top N results of each topic
  -J                    drop unjudged documents from the results first (use with care)
  -N N                  number of documents in the collection (for utility's 4th term)
  -D LEVEL[.QID]        evaluate only topic QID (debug output itself is not produced)
  -R qrels, -T trec_results
                        input formats (the only ones supported)

Input: QRELS lines 'qid iter docno grade', RUN lines 'qid Q0 docno rank score runid'
(whitespace separated, '#' starts a comment line). Results are ranked by score, ties by
docno, both descending; the rank column is ignored. Topics absent from the qrels are ignored.
"""

_LONG_OPTS = [
    "help", "version", "query_eval_wanted", "measure=", "complete_rel_info_wanted",
    "level_for_rel=", "nosummary", "Debug_level=", "Judged_docs_only",
    "Number_docs_in_coll=", "Max_retrieved_per_topic=", "Rel_info_format=", "Results_format=",
    "Output_old_results_format", "Zscore=",
]


def _int_option(flag: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"option {flag} needs an integer, got '{text}'") from None


def _parse_args(argv: list[str]) -> tuple[_Options, list[str], list[str], bool, bool]:
    try:
        pairs, positional = getopt.gnu_getopt(argv, "hvqm:cl:nD:JN:M:R:T:oZ:", _LONG_OPTS)
    except getopt.GetoptError as exc:
        raise UsageError(f"{exc}\n{USAGE.rstrip()}") from None
    opts: dict[str, object] = {}
    specs: list[str] = []
    want_help = want_version = False
    for flag, value in pairs:
        key = flag.lstrip("-")
        if key in ("h", "help"):
            want_help = True
        elif key in ("v", "version"):
            want_version = True
        elif key in ("q", "query_eval_wanted"):
            opts["query_flag"] = True
        elif key in ("m", "measure"):
            specs.append(value)
        elif key in ("c", "complete_rel_info_wanted"):
            opts["all_queries"] = True
        elif key in ("l", "level_for_rel"):
            opts["rel_level"] = _int_option(flag, value)
        elif key in ("n", "nosummary"):
            opts["summary_flag"] = False
        elif key in ("J", "Judged_docs_only"):
            opts["judged_only"] = True
        elif key in ("N", "Number_docs_in_coll"):
            opts["num_docs"] = _int_option(flag, value)
        elif key in ("M", "Max_retrieved_per_topic"):
            m = _int_option(flag, value)
            if m < 0:
                raise UsageError(f"option {flag} needs a non-negative integer, got '{value}'")
            opts["max_retrieved"] = m
        elif key in ("D", "Debug_level"):
            _, dot, qid = value.partition(".")
            if dot and qid:
                opts["only_qid"] = qid
        elif key in ("R", "Rel_info_format"):
            if value != "qrels":
                raise UsageError(f"unsupported relevance format '{value}' (only 'qrels')")
        elif key in ("T", "Results_format"):
            if value != "trec_results":
                raise UsageError(f"unsupported results format '{value}' (only 'trec_results')")
        elif key in ("o", "Output_old_results_format"):
            pass  # obsolete in trec_eval 10 as well
        elif key in ("Z", "Zscore"):
            raise UsageError("-Z (Z scores) is not supported")
    return _Options(**opts), specs, positional, want_help, want_version  # type: ignore[arg-type]


def _help_text(specs: list[str]) -> str:
    text = HELP
    if specs:
        try:
            chosen = select_measures(specs)
        except UsageError:
            chosen = []
        if chosen:
            text += "\nmeasures:\n"
            for sel in chosen:
                m = sel.measure
                default = ",".join(_param_text(v) for v in m.default) if m.default else ""
                extra = f" (default parameters: {default})" if default else ""
                text += f"  {m.name:<22}{m.doc}{extra}\n"
    return text


def _param_text(v: object) -> str:
    return str(int(v)) if isinstance(v, int | float) and float(v).is_integer() else str(v)


def main(argv: list[str], stdout: TextIO | None = None) -> int:
    """Run ``trec-eval`` with ``argv`` (without the program name); return the exit status.

    Output goes to ``stdout`` (default ``sys.stdout``); errors are printed to stderr and give
    their exit code (2 for usage and input errors).
    """
    out = stdout if stdout is not None else sys.stdout
    try:
        opts, specs, positional, want_help, want_version = _parse_args(list(argv))
        if want_help:
            out.write(_help_text(specs))
            return 0
        if want_version:
            print(f"rageval trec-eval {_version()} (trec_eval 10.0 compatible)", file=sys.stderr)
            return 0
        if len(positional) != 2:
            raise UsageError(f"expected QRELS and RUN files\n{USAGE.rstrip()}")
        qrels_path, run_path = positional
        if run_path == "-":
            return _main_stdin(qrels_path, specs, opts, out)
        ranking, results = _run(qrels_path, run_path, specs, opts)
        _write(ranking, results, opts, out)
        return 0
    except RagevalError as exc:
        print(exc.format(), file=sys.stderr)
        return exc.exit_code


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("rageval")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


def _main_stdin(qrels_path: str, specs: list[str], opts: _Options, out: TextIO) -> int:
    data = sys.stdin.buffer.read()
    with tempfile.NamedTemporaryFile("wb", suffix=".run", delete=False) as tmp:
        tmp.write(data)
        name = tmp.name
    try:
        ranking, results = _run(qrels_path, name, specs, opts)
        _write(ranking, results, opts, out)
    finally:
        os.unlink(name)
    return 0
