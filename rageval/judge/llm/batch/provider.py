"""A provider's batch API through the openai SDK: :class:`BatchProvider` uploads a batch's
input file, creates the batch, looks at it, downloads its output and error files and cancels
it (the SDK retries passing faults: 429, 5xx, dropped connections). Its errors are
:class:`~rageval.judge.llm.transport.requests.JudgeError`, with the key and the URL's
credentials redacted."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import openai

from rageval.judge.llm.batch.lines import ENDPOINT
from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.transport.endpoint import Endpoint
from rageval.judge.llm.transport.requests import JudgeError
from rageval.judge.llm.transport.sdk import error_text

__all__ = ["FINISHED", "BatchGone", "BatchProvider", "BatchStatus"]

#: The statuses after which a batch changes no more.
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})
T = TypeVar("T")
#: How many of the account's batches, newest first, are searched for one made of a given input
#: file (a run killed between uploading its file and recording the batch it created).
FIND_AMONG = 1000


class BatchGone(JudgeError):
    """The provider knows no such batch (404): another key's, or one deleted since."""


@dataclass(frozen=True)
class BatchStatus:
    """What the provider says of a batch now."""

    id: str
    status: str
    completed: int = 0
    failed: int = 0
    total: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: str = ""  # why a batch failed as a whole (its input file refused)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


class BatchProvider:
    """The files and batches endpoints of one OpenAI-compatible base URL."""

    def __init__(self, config: JudgeConfig) -> None:
        self.endpoint = endpoint = Endpoint.of(config.base_url)
        key = os.environ.get(config.api_key_env, "") or "unused"
        self._secrets = tuple(s for s in {key, *endpoint.secrets}
                              if len(s) >= 4 and s != "unused")
        self._sdk = openai.OpenAI(base_url=endpoint.base_url, api_key=key,
                                  default_query=endpoint.query or None,
                                  max_retries=config.max_retries, timeout=config.timeout)
        del key

    def upload(self, name: str, data: bytes) -> str:
        """Upload a batch's input file; its file id."""
        return self._call("uploading the batch file", lambda: self._sdk.files.create(
            file=(name, data, "application/jsonl"), purpose="batch")).id

    def create(self, input_file_id: str) -> str:
        """Create a batch of the uploaded file's requests; its id."""
        return self._call("creating the batch", lambda: self._sdk.batches.create(
            input_file_id=input_file_id, endpoint=ENDPOINT, completion_window="24h",
            metadata={"made_by": "rageval"})).id

    def status(self, batch_id: str) -> BatchStatus:
        """What the provider says of the batch now."""
        batch = self._call(f"looking at batch {batch_id}",
                           lambda: self._sdk.batches.retrieve(batch_id))
        counts = batch.request_counts
        errors = "; ".join(str(e.message or e.code) for e in (batch.errors.data or [])
                           ) if batch.errors is not None and batch.errors.data else ""
        return BatchStatus(batch.id, batch.status, counts.completed if counts else 0,
                           counts.failed if counts else 0, counts.total if counts else 0,
                           batch.output_file_id, batch.error_file_id, self.redact(errors))

    def find(self, input_file_id: str) -> str | None:
        """The id of the batch made of ``input_file_id`` among the account's
        :data:`FIND_AMONG` newest (None: there is none)."""
        def search() -> str | None:
            for n, batch in enumerate(self._sdk.batches.list(limit=100)):
                if batch.input_file_id == input_file_id:
                    return batch.id
                if n + 1 >= FIND_AMONG:
                    break
            return None
        return self._call("looking for the batch of an uploaded file", search)

    def content(self, file_id: str) -> str:
        """A file's text (a batch's output or error file)."""
        return self._call(f"downloading file {file_id}",
                          lambda: self._sdk.files.content(file_id)).text

    def cancel(self, batch_id: str) -> str:
        """Ask the provider to cancel the batch; its status then."""
        return str(self._call(f"cancelling batch {batch_id}",
                              lambda: self._sdk.batches.cancel(batch_id)).status)

    def _call(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except openai.APIStatusError as exc:
            error = BatchGone if exc.status_code == 404 else JudgeError
            raise error(f"{self._where()}: {what} failed: HTTP {exc.status_code}, "
                        f"{self.redact(error_text(exc))}") from None
        except (openai.OpenAIError, ValueError) as exc:
            raise JudgeError(f"{self._where()}: {what} failed: "
                             f"{self.redact(type(exc).__name__ + ': ' + str(exc))}") from None

    def _where(self) -> str:
        return f"judge batch endpoint {self.endpoint.shown}"

    def redact(self, text: Any) -> str:
        """``text`` with the key and the URL's credentials masked."""
        text = self.endpoint.redact(str(text))
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text
