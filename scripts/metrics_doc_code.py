"""Where a metric's code and tests are, for ``scripts/make_metrics_doc.py``: the methods and
kernels that compute a metric's value and build its signature (read from the class with
``inspect``), and whether each test a :class:`Reference` names exists."""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import textwrap
from pathlib import Path
from types import FunctionType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from metrics_doc_references import Reference  # noqa: E402

from rageval.core.metric import Metric  # noqa: E402  (the checkout's rageval)

# -- where the code is ----------------------------------------------------------------------

#: The method that computes a metric's per-record value, looked for in this order.
VALUE_METHODS = ("compute", "counts", "formula", "score")


def _owner(cls: type, method: str) -> type | None:
    """The class of ``cls``'s MRO that defines ``method`` (concretely), or None."""
    for klass in cls.__mro__:
        func = klass.__dict__.get(method)
        if func is not None:
            return None if getattr(func, "__isabstractmethod__", False) else klass
    return None


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:  # an installed copy: name it from the package root
        parts = path.resolve().parts
        return "/".join(parts[parts.index("rageval"):]) if "rageval" in parts else str(path)


def _where(obj: Any) -> str:
    return f"`{_relative(Path(inspect.getsourcefile(obj) or '?'))}`"


def _method_ref(klass: type, method: str) -> str:
    return f"`{klass.__qualname__}.{method}` in {_where(klass.__dict__[method])}"


def _called(func: FunctionType) -> list[Any]:
    """The functions of other rageval modules (the core's helpers left out) that ``func``
    calls by name: the kernel behind a thin method."""
    source = textwrap.dedent(inspect.getsource(func))
    found: list[Any] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        target = _resolve(node.func, func.__globals__)
        module = getattr(target, "__module__", "") or ""
        if (inspect.isfunction(target) and module.startswith("rageval.")
                and not module.startswith("rageval.core.") and module != func.__module__
                and target not in found):
            found.append(target)
    return found


def _resolve(node: ast.expr, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, names)
        return getattr(base, node.attr, None) if inspect.ismodule(base) else None
    return None


def value_code(cls: type[Metric]) -> list[str]:
    """Where the value is computed: the first of :data:`VALUE_METHODS` the class defines, the
    rageval functions a thin one calls (the kernel), the batch method around it and a corpus
    figure's."""
    lines: list[str] = []
    for method in VALUE_METHODS:
        owner = _owner(cls, method)
        if owner is None:
            continue
        func = owner.__dict__[method]
        line = _method_ref(owner, method)
        # A thin method names its kernel; a whole batch's ``score`` calls too much to list.
        calls = _called(func) if method != "score" else []
        if calls:
            line += ", which calls " + ", ".join(
                f"`{c.__name__}` in {_where(c)}" for c in calls)
        lines.append(line)
        if method != "score":
            score_owner = _owner(cls, "score")
            if score_owner is not None:
                lines.append("per batch: " + _method_ref(score_owner, "score"))
        break
    corpus = _owner(cls, "corpus_value")
    if corpus is not None and corpus is not Metric:
        lines.append("the summary's corpus figure: " + _method_ref(corpus, "corpus_value"))
    return lines


def signature_code(cls: type[Metric]) -> list[str]:
    """Where the signature is built: ``signature`` (the base class's, or an override), the
    fields the class adds (``signature_extra``) and what it reads from the results
    (``result_signature``)."""
    lines = [_method_ref(_owner(cls, "signature") or Metric, "signature")]
    for method in ("signature_extra", "result_signature"):
        owner = _owner(cls, method)
        if owner is not None and owner is not Metric:
            lines.append(_method_ref(owner, method))
    return lines


# -- tests ------------------------------------------------------------------------------------

def missing_tests(reference: Reference) -> list[str]:
    """The ``path::name`` entries of ``reference`` whose test function is not there."""
    return [test for test in (*reference.parity, *reference.tests) if not _test_exists(test)]


@functools.cache
def _parsed(file: Path) -> ast.Module | None:
    return ast.parse(file.read_text(encoding="utf-8")) if file.is_file() else None


def _test_exists(test: str) -> bool:
    path, _, name = test.partition("::")
    tree = _parsed(ROOT / path)
    if not name or tree is None:
        return False
    scopes: list[list[ast.stmt]] = [tree.body]
    *classes, function = name.split("::")
    for cls_name in classes:
        body = next((n.body for n in scopes[-1]
                     if isinstance(n, ast.ClassDef) and n.name == cls_name), None)
        if body is None:
            return False
        scopes.append(body)
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function
               for n in scopes[-1])
