"""The name -> metric table: registration, lookup with aliases and "did you mean", and the
built-in families, imported on first use (each registers its metrics on import)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

from rageval.core.errors import UsageError, did_you_mean
from rageval.core.metric import (
    Metric,
    ScoreOptions,
)
from rageval.core.names import MetricName, parse
from rageval.core.providers import JudgmentsProvider

__all__ = ["create", "judgments_provider", "metric_classes", "register", "register_family",
           "register_judgments", "register_namespace"]

_REGISTRY: dict[str, type[Metric]] = {}
_NAMESPACES: dict[str, Callable[[MetricName, ScoreOptions], Metric]] = {}
_FAMILIES: list[tuple[re.Pattern[str], Callable[[str], type[Metric]]]] = []


def register(cls: type[Metric]) -> type[Metric]:
    """Class decorator: add a metric class to the name table."""
    if cls.base in _REGISTRY:
        raise ValueError(f"metric {cls.base!r} registered twice")
    _REGISTRY[cls.base] = cls
    return cls


def register_family(pattern: str, make_class: Callable[[str], type[Metric]]) -> None:
    """Bases matching ``pattern`` (e.g. ``rouge[0-9]+``) are built by ``make_class(base)``.

    For open-ended families such as ROUGE-N; ``make_class`` should return the same class for the
    same base so that equal names give equal metrics.
    """
    _FAMILIES.append((re.compile(pattern), make_class))


def register_namespace(
    namespace: str, factory: Callable[[MetricName, ScoreOptions], Metric]
) -> None:
    """Names like ``judge:faithfulness`` are built by a factory of their namespace."""
    _NAMESPACES[namespace] = factory


def metric_classes() -> dict[str, type[Metric]]:
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def create(name: str | MetricName, options: ScoreOptions | None = None) -> Metric:
    """Build the metric a name denotes; unknown names get "did you mean ...?"."""
    parsed = parse_name(name) if isinstance(name, str) else name
    opts = options or ScoreOptions()
    importlib.import_module(_home(parsed))
    if parsed.namespace is not None:
        factory = _NAMESPACES.get(parsed.namespace)
        if factory is None:
            _load_builtin()
            factory = _NAMESPACES.get(parsed.namespace)
        if factory is None:
            raise UsageError(_unknown(parsed.namespace + ":", [f"{n}:" for n in _NAMESPACES]))
        return factory(parsed, opts)
    cls = _lookup(parsed.base)
    if cls is None:
        _load_builtin()
        cls = _lookup(parsed.base)
    if cls is None:
        raise UsageError(_unknown(parsed.base, [*_REGISTRY, *_ALIASES]))
    return cls(cutoff=parsed.cutoff, options=opts, **dict(parsed.params))


def parse_name(text: str) -> MetricName:
    """The name parsed; a malformed one (``rouge-l``) gets the registered name it is
    closest to, when one is close."""
    try:
        return parse(text)
    except UsageError as error:
        _load_builtin()
        word = re.split(r"[(@]", text.strip(), maxsplit=1)[0]
        known = [*_REGISTRY, *_ALIASES]
        same = {_folded(name): name for name in known}.get(_folded(word))
        hint = (f"did you mean {same!r}?" if same is not None
                else did_you_mean(word.lower(), known, n=3, cutoff=0.5))
        if not hint:
            raise
        raise UsageError(f"{error}; {hint}") from None


def _folded(name: str) -> str:
    """A name without case, hyphens or underscores: ``rouge-l``, ``ROUGE_L`` and ``rougeL``."""
    return name.lower().replace("-", "").replace("_", "")


def _home(parsed: MetricName) -> str:
    """The built-in module that registers this name, if the name is a built-in one: a run
    imports only its metrics' families (all of them cost a lexical run more than its scoring
    of a small file). Names found nowhere there load every family before they are refused."""
    if parsed.namespace is not None:
        return _NAMESPACE_HOMES.get(parsed.namespace.lower(), _NAMESPACE_HOME)
    base = parsed.base.lower()
    return next((module for prefix, module in _HOMES if base.startswith(prefix)),
                _RETRIEVAL_HOME)


def _lookup(base: str) -> type[Metric] | None:
    """Exact name, then case-insensitive name or alias, then a family pattern (``rouge3``)."""
    if base in _REGISTRY:
        return _REGISTRY[base]
    folded = {name.lower(): cls for name, cls in _REGISTRY.items()}
    key = base.lower()
    if key in folded:
        return folded[key]
    if key in _ALIASES:
        return _REGISTRY[_ALIASES[key]]
    for pattern, make_class in _FAMILIES:
        if pattern.fullmatch(key):
            return make_class(key)
    return None


def _unknown(what: str, known: list[str]) -> str:
    hint = did_you_mean(what.lower(), known, n=3, cutoff=0.5)
    hint = f"; {hint}" if hint else ""
    return f"unknown metric {what!r}{hint} (`rageval metrics` lists them all)"


# Friendly aliases; the canonical name is the registered one.
_ALIASES: dict[str, str] = {
    "precision": "p",
    "success": "hit",
    "hit_rate": "hit",
    "recip_rank": "mrr",
    "r_precision": "rprec",
}

# Importing these modules registers their metrics; heavy libraries load lazily inside them.
BUILTIN_MODULES: tuple[str, ...] = (
    "rageval.retrieval.measures",
    "rageval.generation.rouge",
    "rageval.generation.bleu",
    "rageval.generation.bertscore",
    "rageval.judge.registration",
    "rageval.tools",
)
_loaded = False
# Where each built-in name lives, by prefix; anything else is a retrieval measure or unknown.
_HOMES: tuple[tuple[str, str], ...] = (
    ("rouge", "rageval.generation.rouge"),
    ("bleu", "rageval.generation.bleu"),
    ("bertscore", "rageval.generation.bertscore"),
)
_NAMESPACE_HOME = "rageval.judge.registration"
_NAMESPACE_HOMES = {"tools": "rageval.tools"}
_RETRIEVAL_HOME = "rageval.retrieval.measures"


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


_JUDGMENTS: dict[str, Callable[[ScoreOptions], JudgmentsProvider]] = {}


def register_judgments(name: str, factory: Callable[[ScoreOptions], JudgmentsProvider]) -> None:
    """``judgments_from=name`` (``--judgments-from name``) is served by ``factory(options)``."""
    _JUDGMENTS[name] = factory


def judgments_provider(name: str, options: ScoreOptions) -> JudgmentsProvider:
    """The provider registered as ``name``, built for this run's options."""
    _load_builtin()
    factory = _JUDGMENTS.get(name)
    if factory is None:
        known = ", ".join(repr(n) for n in sorted(_JUDGMENTS)) or "none"
        raise UsageError(f"judgments_from must be one of {known} or None, got {name!r}")
    return factory(options)
