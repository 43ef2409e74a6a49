"""Reading an evaluation file: a TOML document that writes a run down once.

::

    metrics = ["ndcg@10", "mrr", "rouge1", "judge:faithfulness"]
    optional_metrics = ["bertscore"]   # scored where pip install 'rageval[bertscore]' was run

    [inputs]
    records = "records.jsonl"          # relative to this file
    qrels = "qrels.txt"

    [judge]
    model = "gpt-4o-mini"
    cache = "judge_cache.sqlite"
    offline = true

    [output]
    dir = "out/eval"                   # relative to where rageval runs

    [gate]
    fail_under = {"ndcg@10" = 0.45, "judge:faithfulness" = 4.0}

Every field and the option it sets are listed in :mod:`rageval.config.schema`.
:func:`read_eval_file` checks the whole file before anything runs: a syntax error, an unknown
table or key (with the names it was likely meant to be), a value of the wrong type or out of
its choices is an :class:`~rageval.core.errors.InputError` naming the file, the line and the
field.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rageval.config.schema import BY_PATH, FIELDS, TABLES, Field
from rageval.config.toml_lines import key_lines, line_of
from rageval.core.errors import InputError, did_you_mean


@dataclass(frozen=True)
class EvalFile:
    """A checked evaluation file: ``options`` maps each option of ``rageval score`` the file
    sets to its value (paths already resolved against the file's folder)."""

    path: Path
    options: dict[str, Any] = field(default_factory=dict)


def read_eval_file(path: str | os.PathLike[str]) -> EvalFile:
    """Read and check an evaluation file (see the module docstring)."""
    source = Path(path)
    try:
        text = source.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InputError("no such evaluation file", path=str(source)) from None
    except IsADirectoryError:
        raise InputError("an evaluation file is a TOML file, not a directory",
                         path=str(source)) from None
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8: {error.reason}", path=str(source)) from None
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", path=str(source)) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"not valid TOML: {error}", path=str(source)) from None
    reader = _Reader(source, key_lines(text))
    return EvalFile(source, reader.options(document))


@dataclass
class _Reader:
    source: Path
    lines: dict[tuple[str, ...], int]

    def error(self, message: str, path: tuple[str, ...]) -> InputError:
        return InputError(message, path=str(self.source), line=line_of(self.lines, path),
                          field=".".join(path))

    def options(self, document: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in document.items():
            if key in TABLES:
                if not isinstance(value, dict):
                    raise self.error(f"'{key}' is a table: write [{key}] above its keys",
                                     (key,))
                for inner, item in value.items():
                    self._one((key, inner), item, out)
            else:
                self._one((key,), value, out)
        if "records" in out and "run" in out:
            raise self.error("give the records or a run to build them from, not both",
                             ("inputs", "run"))
        return out

    def _one(self, path: tuple[str, ...], value: Any, out: dict[str, Any]) -> None:
        spec = BY_PATH.get(path)
        if spec is None:
            raise self.error(self._unknown(path), path)
        if spec.dest == "description":
            if not isinstance(value, str):
                raise self.error(f"expected a string, got {_kind(value)}", path)
            return
        out[spec.dest] = self._convert(spec, value)

    def _unknown(self, path: tuple[str, ...]) -> str:
        if len(path) == 1:
            known = sorted({f.path[0] for f in FIELDS})
            what = f"unknown key or table '{path[0]}'"
        else:
            known = sorted(f.path[1] for f in FIELDS if f.path[0] == path[0])
            what = f"unknown key '{path[1]}' in [{path[0]}]"
        hint = did_you_mean(path[-1], known, n=2)
        return what + (f" ({hint})" if hint else f"; known: {', '.join(known)}")

    def _convert(self, spec: Field, value: Any) -> Any:
        path = spec.path
        if spec.kind in ("str", "path", "out", "choice"):
            if not isinstance(value, str) or not value:
                raise self.error(f"expected a non-empty string, got {_kind(value)}", path)
            if spec.kind == "choice" and value not in spec.choices:
                raise self.error(f"{value!r} is not one of {', '.join(spec.choices)}", path)
            if spec.kind == "path":
                return str(self.source.parent / Path(value).expanduser())
            return value
        if spec.kind == "bool":
            if not isinstance(value, bool):
                raise self.error(f"expected true or false, got {_kind(value)}", path)
            return value
        if spec.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(f"expected an integer, got {_kind(value)}", path)
            return value
        if spec.kind == "float":
            return self._number(value, path)
        if spec.kind == "metrics":
            return self._metrics(value, path)
        if spec.kind == "strings":
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise self.error(f"expected a list of non-empty strings, got {_kind(value)}",
                                 path)
            return list(value)
        return self._pairs(spec, value, path)

    def _json(self, value: Any, path: tuple[str, ...]) -> str:
        import datetime
        import json

        if isinstance(value, datetime.date | datetime.time):
            raise self.error(f"expected a JSON value, got a date or time ({value})", path)
        try:
            return json.dumps(value, allow_nan=False)
        except ValueError:
            raise self.error(f"expected a finite number, got {value}", path) from None

    def _number(self, value: Any, path: tuple[str, ...]) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"expected a number, got {_kind(value)}", path)
        if not math.isfinite(value):
            raise self.error(f"expected a finite number, got {value}", path)
        return float(value)

    def _metrics(self, value: Any, path: tuple[str, ...]) -> list[str]:
        if not isinstance(value, list):
            raise self.error(f"expected a list of metric names, got {_kind(value)}", path)
        return [self._metric(item, (*path[:-1], f"{path[-1]}[{i}]"), path)
                for i, item in enumerate(value)]

    def _metric(self, item: Any, where: tuple[str, ...], path: tuple[str, ...]) -> str:
        from rageval.core.errors import UsageError
        from rageval.core.names import parse

        try:
            if isinstance(item, str):
                return str(parse(item))
            if isinstance(item, dict):
                return str(_table_name(item))
        except UsageError as error:
            raise InputError(str(error), path=str(self.source), line=line_of(self.lines, path),
                             field=".".join(where)) from None
        raise InputError(f"expected a metric name or an inline table, got {_kind(item)}",
                         path=str(self.source), line=line_of(self.lines, path),
                         field=".".join(where))

    def _pairs(self, spec: Field, value: Any, path: tuple[str, ...]) -> list[str]:
        if not isinstance(value, dict):
            example = {"columns": '{query = "question"}', "params": "{repeat_penalty = 1.1}"
                       }.get(spec.kind, '{"ndcg@10" = 0.45}')
            raise self.error(f"expected an inline table such as {example}, got "
                             f"{_kind(value)}", path)
        items = []
        for key, item in value.items():
            inner = (*path, key)
            if spec.kind == "columns":
                if not isinstance(item, str) or not item:
                    raise self.error(f"expected a column name, got {_kind(item)}", inner)
                items.append(f"{key}={item}")
            elif spec.kind == "params":
                items.append(f"{key}={self._json(item, inner)}")
            else:
                items.append(f"{key}={self._number(item, inner)!r}")
        return items


def _table_name(item: dict[str, Any]) -> Any:
    """``{name = "ndcg", cutoff = 10, gain = "exp"}`` as a metric name."""
    from rageval.core.errors import UsageError
    from rageval.core.names import MetricName, parse
    from rageval.core.params import render_value

    rest = dict(item)
    base = rest.pop("name", None)
    if not isinstance(base, str) or not base:
        raise UsageError("a metric table needs name = \"...\" (e.g. {name = \"ndcg\", "
                         "cutoff = 10})")
    cutoff = rest.pop("cutoff", None)
    if cutoff is not None and (isinstance(cutoff, bool) or not isinstance(cutoff, int)
                               or cutoff < 1):
        raise UsageError(f"cutoff must be a positive integer, got {cutoff!r}")
    for key, value in rest.items():
        if isinstance(value, (dict, list)):
            raise UsageError(f"parameter {key} must be a single value, got {_kind(value)}")
    params = tuple((key, render_value(value)) for key, value in rest.items())
    # Parsed back so that the name is checked by the grammar exactly as a written one is.
    return parse(str(MetricName(base, params, cutoff)))


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a table"}
    for kind, name in names.items():
        if isinstance(value, kind):
            return f"{name} ({value!r})" if kind in (bool, int, float) else name
    return type(value).__name__
