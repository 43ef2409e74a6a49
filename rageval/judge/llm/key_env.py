"""The environment variable the judge reads its API key from unless told another: declared here,
apart from the judge's configuration, so that a command masking secrets in its output (every
command does) names it without importing the judge."""

from __future__ import annotations

__all__ = ["DEFAULT_API_KEY_ENV"]

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
