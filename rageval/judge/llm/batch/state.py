"""The record of a run's pending batches, kept beside the cache (``<cache>.batches.json``):
each batch's id, its input file, the endpoint and model it asks, the wire format its lines
were sent in, their custom_ids and the parameters they sent adapted. Written (atomically: a
temporary file renamed over it) after a batch is created and before it is polled, so that a
run killed while its batch is pending finds it when run again instead of paying for it twice;
a batch is forgotten once its replies are stored, or cancelled."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rageval.core.errors import InputError

__all__ = ["STATE_SUFFIX", "BatchState", "Recorded", "state_path"]

STATE_SUFFIX = ".batches.json"


def state_path(cache_path: str) -> Path:
    """Where the batches of the cache at ``cache_path`` are recorded."""
    return Path(cache_path + STATE_SUFFIX)


@dataclass
class Recorded:
    """One batch a run created and has not finished with."""

    id: str
    input_file_id: str
    endpoint: str  # public: no credentials
    model: str
    format: str
    custom_ids: list[str]
    # What its lines sent other than configured (a reply's "sent" meta: a reasoning model's
    # max_completion_tokens, a temperature left at the model's default).
    sent: dict[str, Any] = field(default_factory=dict)
    created: float = field(default_factory=time.time)

    def of(self, endpoint: str, model: str) -> bool:
        return self.endpoint == endpoint and self.model == model


class BatchState:
    """The batches recorded in one state file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[Recorded]:
        """Every recorded batch (none when there is no file)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise InputError(f"cannot read the record of pending batches: {exc.strerror}",
                             path=str(self.path)) from None
        try:
            rows = json.loads(text)["batches"]
            return [Recorded(**row) for row in rows]
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"not a record of pending batches ({type(exc).__name__}: {exc}); "
                             "cancel its batches by hand and remove it",
                             path=str(self.path)) from None

    def save(self, batches: list[Recorded]) -> None:
        """Write ``batches`` (the file goes when none is left)."""
        if not batches:
            self.path.unlink(missing_ok=True)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"batches": [asdict(b) for b in batches]}, indent=1)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def add(self, batch: Recorded) -> None:
        self.save([*self.load(), batch])

    def forget(self, batch_ids: set[str]) -> None:
        batches = self.load()
        kept = [b for b in batches if b.id not in batch_ids]
        if len(kept) != len(batches):
            self.save(kept)
