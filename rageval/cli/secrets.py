"""The credentials one command knows, gathered into the run's
:class:`~rageval.core.outputs.masking.Masker` and handed to every writer of its outputs.

They are the judge's API key (the variable ``--judge-api-key-env`` names, and each panel
member's), the user info and query values of the judge's base URLs (with their HTTP Basic
form), ``PHOENIX_API_KEY`` and anything a ``--phoenix`` URL, the MLflow tracking URI or an
``--otel-endpoint`` URL carries, and the header values of the OTLP exporter's variables
(``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_LOGS_HEADERS``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import TextIO
from urllib.parse import unquote

from rageval.core.errors import UsageError
from rageval.core.outputs.masking import Masker, url_secrets
from rageval.judge.llm.key_env import DEFAULT_API_KEY_ENV

__all__ = ["MaskedStream", "header_secrets", "masked", "run_masker"]

_PHOENIX_KEY_ENV = "PHOENIX_API_KEY"
#: The OTLP exporter's headers variables (rageval.otel.export.HEADER_VARIABLES, named here so
#: that a run without OpenTelemetry never loads it).
_OTLP_HEADER_ENVS = ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")


def run_masker(args: argparse.Namespace | None) -> Masker:
    """The masker of one command (``args``: its options; None before they are read)."""
    return Masker.of(_secrets(args))


def _secrets(args: argparse.Namespace | None) -> Iterator[str | None]:
    default_key_env = DEFAULT_API_KEY_ENV
    key_envs = {default_key_env, _PHOENIX_KEY_ENV}
    urls = []
    if args is not None:
        key_envs.add(getattr(args, "judge_api_key_env", None) or default_key_env)
        urls += [getattr(args, "judge_base_url", None), getattr(args, "phoenix", None),
                 getattr(args, "mlflow_tracking_uri", None) or _mlflow_env_uri(args),
                 getattr(args, "otel_endpoint", None)]
        for member in _members(getattr(args, "judge_panel", None) or ()):
            key_envs.add(str(member.get("api_key_env") or default_key_env))
            urls.append(member.get("base_url"))
    for name in key_envs:
        yield os.environ.get(name)
    for url in urls:
        yield from url_secrets(url)
    for name in _OTLP_HEADER_ENVS:
        yield from header_secrets(os.environ.get(name))


def header_secrets(text: str | None) -> Iterator[str]:
    """The values of a headers variable (``name=value`` pairs separated by commas), as written
    and percent-decoded, and the credential after a scheme (``Bearer TOKEN``); a pair written
    ``name: value`` too, as a malformed variable may hold it."""
    for pair in (text or "").split(","):
        _, equals, value = pair.partition("=")
        if not equals:
            _, _, value = pair.partition(":")
        for form in {value.strip(), unquote(value).strip()}:
            yield form
            yield form.rpartition(" ")[2]


def _mlflow_env_uri(args: argparse.Namespace) -> str | None:
    """MLFLOW_TRACKING_URI, where the run is logged to it (only its experiment given)."""
    return os.environ.get("MLFLOW_TRACKING_URI") if getattr(args, "mlflow_experiment", None) \
        else None


def _members(specs: list[str] | tuple[str, ...]) -> Iterator[dict[str, object]]:
    from rageval.judge.llm.members import parse_member

    for spec in specs:
        try:
            yield parse_member(spec)
        except UsageError:  # said when the judge's options are read
            continue


class MaskedStream:
    """A text stream whose every write is masked first (the command's stdout): a second line
    of defence behind the writers, which mask what they put into lines before laying them
    out."""

    def __init__(self, stream: TextIO, masker: Masker) -> None:
        self._stream = stream
        self._masker = masker

    def write(self, text: str) -> int:
        self._stream.write(self._masker(text))
        return len(text)

    def __getattr__(self, name: str) -> object:  # isatty, flush, encoding, fileno, ...
        return getattr(self._stream, name)


def masked(stream: TextIO, masker: Masker) -> TextIO:
    """``stream``, masked when there is a secret to mask."""
    return MaskedStream(stream, masker) if masker.secrets else stream  # type: ignore[return-value]
