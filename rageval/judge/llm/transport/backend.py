"""Where a judge's chat requests go: the :class:`ChatBackend` protocol, and a run's backends.

A backend sends one chat request to one model at one endpoint and owns what a run learns of
them: the wire formats the endpoint accepts (a
:class:`~rageval.judge.llm.transport.negotiation.Negotiation`), the request parameters it
refuses (a :class:`~rageval.judge.llm.transport.params.ParamNegotiation`) and the model it says
it serves.
The OpenAI-compatible chat completions of the ``openai`` SDK are
:class:`~rageval.judge.llm.transport.sdk.SdkBackend`; a provider's batch API would be another
backend beside it. :class:`~rageval.judge.llm.transport.client.JudgeClient` is given its
backend; a run hands out one backend per endpoint and model (:class:`Backends`), so that its
clients share what was learned and two runs in one process share nothing.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rageval.judge.llm.transport.endpoint import Endpoint
from rageval.judge.llm.transport.negotiation import Negotiation
from rageval.judge.llm.transport.params import ParamNegotiation

if TYPE_CHECKING:
    from rageval.judge.llm.config import JudgeConfig

__all__ = ["Backends", "ChatBackend"]


@runtime_checkable
class ChatBackend(Protocol):
    """One model at one endpoint, asked for chat completions, and what the run learned of it."""

    model: str
    endpoint: Endpoint
    timeout: float  # seconds per attempt
    max_retries: int  # attempts after the first for a passing fault
    formats: Negotiation  # the wire formats the endpoint accepts, as learned so far
    params: ParamNegotiation  # the request parameters it refused, and how they are adapted
    secrets: tuple[str, ...]  # texts no message may show (the key, the URL's credentials)

    def chat(self, kwargs: dict[str, Any], body: dict[str, Any], *, retries: int | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        """One chat completion, the reply's JSON object (``retries``, ``timeout``: this
        request's own, else the backend's)."""
        ...

    def served_model(self) -> str | None:
        """The model the endpoint says serves :attr:`model` now (None: it does not say)."""
        ...


class Backends:
    """The backends of one run, one per endpoint, model and the settings a backend is built
    with; made when first asked for. Copied to another process (a distributed run's worker),
    it arrives empty: what a backend learned stays with the process that learned it."""

    def __init__(self) -> None:
        self._backends: dict[tuple[Any, ...], ChatBackend] = {}
        self._lock = threading.Lock()

    def get(self, config: JudgeConfig) -> ChatBackend:
        """The run's backend for the model and endpoint of ``config`` (the SDK's chat
        completions), one per what a backend is built from (the key's variable, the timeout and
        the retries too)."""
        from rageval.judge.llm.transport.sdk import SdkBackend  # the openai package, when asked

        key = (Endpoint.of(config.base_url).url, config.model or "", config.api_key_env,
               config.timeout, config.max_retries)
        with self._lock:
            backend = self._backends.get(key)
            if backend is None:
                backend = self._backends[key] = SdkBackend(config)
            return backend

    def __len__(self) -> int:
        with self._lock:
            return len(self._backends)

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]
