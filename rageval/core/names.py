"""The metric-name grammar.

A metric name is written the same way on the command line, in the Python API and in every output
file::

    name     := base [ "(" params ")" ] [ "@" cutoff ]
    base     := ident | namespace ":" target          e.g. ndcg, rouge2, judge:faithfulness
    params   := key "=" value { "," key "=" value }   e.g. (rel=2), (model=roberta-large,layer=17)
    cutoff   := positive integer                      e.g. @10

Examples: ``p@5``, ``p(rel=2)@5``, ``ndcg(gain=exp)@10``, ``err(gmax=3)@10``, ``rouge2``,
``bertscore(model=roberta-large,layer=17)``, ``judge:faithfulness``.

:func:`parse` and :meth:`MetricName.__str__` are inverses: ``parse(str(name)) == name``. The
canonical string lists parameters sorted by key, so ``ndcg(b=1,a=2)`` and ``ndcg(a=2,b=1)`` are the
same name. Whether a name denotes a known metric, and which parameters it takes, is the registry's
business (:mod:`rageval.core.registry`); this module only reads and writes the syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rageval.core.errors import UsageError

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A namespaced target (a rubric name or a rubric path) may hold dots, slashes and dashes.
_TARGET = r"[A-Za-z0-9_./\\~-]+"
_VALUE = r"[^,()=@\s]+"
_NAME_RE = re.compile(
    rf"^(?P<base>{_IDENT}(?::{_TARGET})?)"
    rf"(?:\((?P<params>[^()]*)\))?"
    rf"(?:@(?P<cutoff>[0-9]+))?$"
)
_PARAM_RE = re.compile(rf"^\s*(?P<key>{_IDENT})\s*=\s*(?P<value>{_VALUE})\s*$")


@dataclass(frozen=True, slots=True)
class MetricName:
    """A parsed metric name: base, sorted ``(key, value)`` parameter pairs, optional cutoff."""

    base: str
    params: tuple[tuple[str, str], ...] = ()
    cutoff: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(sorted(self.params)))

    @property
    def namespace(self) -> str | None:
        """``judge`` for ``judge:faithfulness``; None for plain names."""
        return self.base.split(":", 1)[0] if ":" in self.base else None

    def param(self, key: str) -> str | None:
        return dict(self.params).get(key)

    def __str__(self) -> str:
        text = self.base
        if self.params:
            text += "(" + ",".join(f"{k}={v}" for k, v in self.params) + ")"
        if self.cutoff is not None:
            text += f"@{self.cutoff}"
        return text


def parse(text: str) -> MetricName:
    """Parse a metric name; raise :class:`UsageError` with the reason when it is malformed."""
    if not isinstance(text, str):
        raise UsageError(f"a metric name must be a string, got {type(text).__name__}")
    match = _NAME_RE.match(text.strip())
    if match is None:
        raise UsageError(
            f"malformed metric name {text!r}: expected NAME[(key=value,...)][@K], "
            "e.g. 'ndcg@10', 'p(rel=2)@5', 'judge:faithfulness'"
        )
    params = _parse_params(text, match.group("params"))
    cutoff = match.group("cutoff")
    if cutoff is not None and int(cutoff) < 1:
        raise UsageError(f"metric name {text!r}: the cutoff after '@' must be at least 1")
    return MetricName(
        base=_base(match.group("base")),
        params=params,
        cutoff=int(cutoff) if cutoff is not None else None,
    )


def _base(base: str) -> str:
    # A namespace is case-insensitive; the target (a rubric name or path) keeps its case. Plain
    # bases keep their case too (``rougeL``); the registry matches them case-insensitively and
    # its canonical spelling is the one printed.
    if ":" not in base:
        return base
    namespace, target = base.split(":", 1)
    return f"{namespace.lower()}:{target}"


def _parse_params(text: str, raw: str | None) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not raw.strip():
        raise UsageError(f"metric name {text!r}: empty parameter list '()'")
    pairs: dict[str, str] = {}
    for part in raw.split(","):
        match = _PARAM_RE.match(part)
        if match is None:
            raise UsageError(
                f"metric name {text!r}: malformed parameter {part.strip()!r}, expected key=value"
            )
        key = match.group("key").lower()
        if key in pairs:
            raise UsageError(f"metric name {text!r}: parameter {key!r} given twice")
        pairs[key] = match.group("value")
    return tuple(pairs.items())
