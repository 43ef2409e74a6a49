"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _fresh_structured_output_verdicts() -> Iterator[None]:
    """The judge client remembers, per process, which endpoints refuse structured output;
    loopback servers of different tests may reuse a port, so each test starts with none."""
    from rageval.judge import negotiation

    negotiation.forget()
    yield
    negotiation.forget()
