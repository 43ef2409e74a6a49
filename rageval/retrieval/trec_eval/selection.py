"""trec_eval's ``-m`` syntax: measures and nicknames, with their parameters.

Parameters follow a ``.``: cutoffs (``-m P.5,10``, ``-m ndcg_cut.10``), values
(``-m relstring.20``, ``-m set_F.0.5``) or ``name=value`` pairs (``-m ndcg.1=3,2=7``), parsed
as trec_eval parses them (C's ``atol``/``atof``); each value gets its printed name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rageval.core.errors import UsageError
from rageval.retrieval.trec.syntax import WHITESPACE, c_atof, c_atol
from rageval.retrieval.trec_eval.catalogue import (
    MEASURES,
    NICKNAMES,
    UNSUPPORTED,
    UNSUPPORTED_NICKNAMES,
    Measure,
)

_BY_NAME = {m.name: m for m in MEASURES}


@dataclass(frozen=True)
class SelectedMeasure:
    """A measure chosen with ``-m``, its parameters, and the printed name of each value."""

    measure: Measure
    params: tuple
    names: tuple[str, ...]  # printed name of each value column


def _atol(text: str) -> int:
    return c_atol(text.lstrip(WHITESPACE).encode())[0]  # atol skips leading whitespace


def _atof(text: str) -> float:
    return c_atof(text.lstrip(WHITESPACE).encode())[0]


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
    return measure.default, None  # a measure without parameters ignores any, as trec_eval


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


class UnknownMeasure(UsageError):
    """An ``-m`` argument trec_eval rejects as it reads the command line (exit status 1 in
    ``rageval trec-eval``): an unknown name, or a '.' with nothing after it."""


def _marked(specs: Sequence[str]) -> tuple[set[str], dict[str, str]]:
    marked: set[str] = set()
    params_text: dict[str, str] = {}
    for spec in specs or ["official"]:
        base, dot, params = spec.partition(".")
        if dot:
            if not params:
                raise UnknownMeasure(f"improper measure parameters in '{spec}'")
            params_text.setdefault(base, params)  # the first parameters given win
        if base in NICKNAMES:
            marked.update(NICKNAMES[base])
        elif base in _BY_NAME:
            marked.add(base)
        elif base in UNSUPPORTED or base in UNSUPPORTED_NICKNAMES:
            raise UsageError(
                f"measure '{base}' needs preference judgments (-R prefs or qrels_prefs), "
                "which rageval trec-eval does not read"
            )
        else:
            raise UnknownMeasure(f"unknown measure '{spec}' (see 'rageval trec-eval -h')")
    return marked, params_text


def check_names(specs: Sequence[str]) -> None:
    """Check the measure names of ``-m`` arguments, not their parameters (trec_eval checks
    those later, once it has read the files)."""
    _marked(specs)


def select_measures(specs: Sequence[str]) -> list[SelectedMeasure]:
    """Resolve ``-m`` arguments into measures (in trec_eval's output order) with parameters.

    Raises UsageError for an unknown measure or nickname (:class:`UnknownMeasure`), malformed
    parameters, or a measure that needs input formats rageval does not read (preference
    judgments).
    """
    marked, params_text = _marked(specs)
    selected = []
    for m in MEASURES:
        if m.name in marked:
            params, printable = _parse_params(m, params_text.get(m.name))
            selected.append(SelectedMeasure(m, params, _column_names(m, params, printable)))
    return selected
