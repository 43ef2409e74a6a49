"""User-facing errors.

Every error a user can cause is a :class:`RagevalError` that knows its exit code and how to
print itself, so the CLI never shows a traceback for bad input (the click pattern). Errors are
raised explicitly, never through ``assert`` (stripped by ``python -O``). Two wordings every
layer shares live here too: :func:`check_int` ("must be an integer of at least ...", with the
largest counts an option takes) and
:func:`did_you_mean` (the close names of a misspelt one).
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable


class RagevalError(Exception):
    """Base class of every error rageval reports to a user."""

    exit_code: int = 1

    def format(self) -> str:
        return f"rageval: error: {self}"


class UsageError(RagevalError):
    """Bad command line or bad API arguments (unknown metric, bad parameter, ...)."""

    exit_code = 2


class InputError(RagevalError):
    """Bad input data: names the file, the line (1-based) and the field where known."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class InputWarning(UserWarning):
    """Input rageval reads, but not as its author may have meant (a number read from the
    start of a field, as C's atof reads it): the readers warn, and the command prints it."""


class MissingDependencyError(RagevalError):
    """An optional dependency is not installed; names the extra to install."""

    exit_code = 2

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"this feature needs the '{package}' package: pip install 'rageval[{extra}]'"
        )


#: The largest count or size an option takes (2**62): larger ones overflow the machine's
#: integers where they become a length, an index or an array's size.
LARGEST_COUNT = 1 << 62
#: The most bootstrap resamples (and randomization-test relabellings) a run takes: each is a
#: row of numbers held for the whole run, and a CI's digits stop moving long before.
MOST_RESAMPLES = 10_000_000
#: The most replies a judge is asked per item (--judge-samples): more queue requests without
#: end.
MOST_SAMPLES = 1_000


def check_int(name: str, value: object, low: int, error: type[Exception] = UsageError,
              high: int | None = None) -> None:
    """Raise ``error`` unless ``value`` is an integer (not a bool) of at least ``low`` (and at
    most ``high``, when given)."""
    # numbers.Integral: numpy's integers too, without importing numpy here.
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low
            or (high is not None and value > high)):
        bounds = f"of at least {low}" if high is None else f"from {low:,} to {high:,}"
        raise error(f"{name} must be an integer {bounds}, got {value!r}")


def close_matches(word: str, known: Iterable[str], *, n: int = 1,
                  cutoff: float = 0.6) -> list[str]:
    """The names of ``known`` closest to ``word`` (at most ``n``, best first)."""
    return difflib.get_close_matches(word, list(known), n=n, cutoff=cutoff)


def did_you_mean(word: str, known: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> str:
    """``did you mean 'a' or 'b'?`` for the names of ``known`` close to ``word``; "" for none."""
    close = close_matches(word, known, n=n, cutoff=cutoff)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
