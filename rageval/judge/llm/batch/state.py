"""The record of a run's pending batches, kept beside the cache (``<cache>.batches.json``):
each batch's input file, its id once created, the endpoint and model it asks, the wire format
its lines were sent in, their custom_ids and the parameters they sent adapted.

A batch is recorded as soon as its input file is uploaded, before the batch is created, and
its id is added once it is: a run killed between the two finds the batch when run again by its
input file (the provider lists each batch's) instead of paying for it twice. A batch is
forgotten once every line it answered is stored; one that answered lines a run did not ask for
(a rerun with fewer metrics) keeps those lines' custom_ids for a later run. Each change is a
read, a change and an atomic write (a temporary file renamed over the record), under a lock on
``<cache>.batches.json.lock`` where the system has ``fcntl``, so that two runs sharing a cache
do not lose each other's batches.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rageval.core.errors import InputError

try:  # POSIX: two runs on one cache take turns; elsewhere each change is still atomic
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["STATE_SUFFIX", "BatchState", "Recorded", "state_path"]

STATE_SUFFIX = ".batches.json"


def state_path(cache_path: str) -> Path:
    """Where the batches of the cache at ``cache_path`` are recorded."""
    return Path(cache_path + STATE_SUFFIX)


@dataclass(frozen=True)
class Recorded:
    """One batch a run uploaded and has not finished with (``id`` empty until it is created)."""

    input_file_id: str
    id: str
    endpoint: str  # public: no credentials
    model: str
    format: str
    custom_ids: tuple[str, ...]
    # What its lines sent other than configured (a reply's "sent" meta: a reasoning model's
    # max_completion_tokens, a temperature left at the model's default).
    sent: dict[str, Any] = field(default_factory=dict)
    created: float = field(default_factory=time.time)

    def of(self, endpoint: str, model: str) -> bool:
        return self.endpoint == endpoint and self.model == model

    @classmethod
    def read(cls, row: object) -> Recorded:
        """A recorded batch from its JSON object; ValueError when it is not one."""
        if not isinstance(row, dict):
            raise ValueError("a recorded batch is not a JSON object")
        for name in ("input_file_id", "id", "endpoint", "model", "format"):
            if not isinstance(row.get(name), str):
                raise ValueError(f"a recorded batch's {name} is not text")
        ids, sent = row.get("custom_ids"), row.get("sent", {})
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError("a recorded batch's custom_ids are not a list of texts")
        if not isinstance(sent, dict):
            raise ValueError("a recorded batch's sent parameters are not a JSON object")
        created = row.get("created", 0.0)
        return cls(row["input_file_id"], row["id"], row["endpoint"], row["model"],
                   row["format"], tuple(ids), sent,
                   float(created) if isinstance(created, int | float) else 0.0)


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
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the record of pending batches: {exc}",
                             path=str(self.path)) from None
        try:
            rows = json.loads(text)["batches"]
            if not isinstance(rows, list):
                raise ValueError("its batches are not a list")
            return [Recorded.read(row) for row in rows]
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"not a record of pending batches ({type(exc).__name__}: {exc}); "
                             "cancel its batches by hand and remove it",
                             path=str(self.path)) from None

    def add(self, batch: Recorded) -> None:
        self._change(lambda batches: [*batches, batch])

    def update(self, batch: Recorded) -> None:
        """Replace the record of the batch with ``batch``'s input file by ``batch``."""
        self._change(lambda batches: [batch if b.input_file_id == batch.input_file_id else b
                                      for b in batches])

    def keep_only(self, batch: Recorded, custom_ids: list[str]) -> None:
        """Keep ``batch`` for ``custom_ids`` alone (forgotten when there are none)."""
        if custom_ids:
            self.update(replace(batch, custom_ids=tuple(custom_ids)))
        else:
            self.forget({batch.input_file_id})

    def forget(self, input_file_ids: set[str]) -> None:
        self._change(lambda batches: [b for b in batches
                                      if b.input_file_id not in input_file_ids])

    def _change(self, change: Callable[[list[Recorded]], list[Recorded]]) -> None:
        with self._locked():
            batches = self.load()
            changed = change(batches)
            if changed != batches:
                self._save(changed)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(str(self.path) + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _save(self, batches: list[Recorded]) -> None:
        """Write ``batches`` (the file goes when none is left)."""
        if not batches:
            self.path.unlink(missing_ok=True)
            return
        rows = [{**asdict(b), "custom_ids": list(b.custom_ids)} for b in batches]
        text = json.dumps({"batches": rows}, indent=1)
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
