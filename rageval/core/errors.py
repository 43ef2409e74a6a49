"""User-facing errors.

Every error a user can cause is a :class:`RagevalError` that knows its exit code and how to
print itself, so the CLI never shows a traceback for bad input (the click pattern). Errors are
raised explicitly, never through ``assert`` (stripped by ``python -O``).
"""

from __future__ import annotations


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
