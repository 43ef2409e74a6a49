"""A simulated GitHub Actions runner: which workflow commands it would act on in a log.

It reads a log as actions/runner reads a step's output (``ActionCommandManager``,
``ActionCommand.TryParseV2`` and ``TryParse``): line by line (``\\n``, ``\\r`` or ``\\r\\n``);
``::name props::data`` at the start of a line after blanks, and the legacy ``##[name props]data``
anywhere in a line, for a registered command name; after ``::stop-commands::TOKEN`` nothing is
acted on until a line whose command is ``TOKEN`` (``::TOKEN::``).
"""

from __future__ import annotations

import re

__all__ = ["REGISTERED", "runner_commands"]

REGISTERED = frozenset({"set-env", "set-output", "save-state", "add-mask", "add-path",
                        "add-matcher", "remove-matcher", "debug", "warning", "error", "notice",
                        "group", "endgroup", "echo", "stop-commands"})


def _parse(line: str, registered: set[str]) -> tuple[str, str] | None:
    """(command name, the rest of its line) of one log line, or None."""
    stripped = line.lstrip()  # .NET TrimStart: every Unicode blank
    if stripped.startswith("::"):
        end = stripped.find("::", 2)
        if end >= 0:
            name = stripped[2:end].split(" ", 1)[0]
            if name in registered:
                return name, stripped[end + 2:]
    start = line.find("##[")
    if start >= 0:
        close = line.find("]", start)
        if close >= 0:
            name = line[start + 3:close].split(" ", 1)[0]
            if name in registered:
                return name, line[close + 1:]
    return None


def runner_commands(log: str) -> list[tuple[str, str]]:
    """Every (command, line) the runner would act on in ``log``, in order."""
    registered = set(REGISTERED)
    stop_token: str | None = None
    acted = []
    for line in re.split(r"\r\n|\r|\n", log):
        found = _parse(line, registered)
        if found is None:
            continue
        name, rest = found
        if stop_token is not None:
            if name == stop_token:
                registered.discard(stop_token)
                stop_token = None
            continue
        if name == "stop-commands":
            stop_token = rest
            registered.add(rest)
        acted.append((name, line))
    return acted
