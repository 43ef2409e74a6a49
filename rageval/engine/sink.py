"""Where the per-record results of a run go as each batch finishes: a list in memory, or
``records.jsonl`` in a run directory, written as the run goes.

A run written as it goes changes its directory in one step
(:class:`~rageval.core.outputs.run_directory.RunDirectory`): the directory's lock is taken
when the sink is made, before anything is scored, so that a second writer is refused at once;
the lines go to ``records.jsonl`` in a hidden staging folder beside the directory while their
SHA-256 is computed; a finished run writes ``conversations.jsonl`` and ``summary.json`` (with
that digest) there too and swaps the folder with the directory. A run that fails removes the
staging folder; one killed on the way leaves it, which no reader of run directories looks at
and the next writer there removes, and the earlier run stays whole.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, BinaryIO

from rageval.core.outputs.run_directory import RunDirectory
from rageval.core.results import RECORDS_DIGEST, RecordResult
from rageval.core.results.conversations import write_conversations
from rageval.core.results.run_records import RecordsFile
from rageval.engine.result_block import ResultBlock

# Lines are handed to the file in blocks of about this many bytes.
_FLUSH_BYTES = 1 << 20


class MemorySink:
    """Keeps every record's results (a run held in memory)."""

    def __init__(self) -> None:
        self.rows: list[RecordResult] = []

    def write(self, block: ResultBlock) -> None:
        self.rows.extend(block.valid_unicode().rows())

    def records(self) -> list[RecordResult]:
        return self.rows

    def commit(self, summary: dict[str, Any]) -> None:
        """Nothing to do: the caller writes a run held in memory where it wants."""

    def abort(self) -> None:
        self.rows.clear()


class FileSink:
    """Writes every record's results to ``out_dir/records.jsonl`` as the batches finish."""

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.directory = Path(out_dir).absolute()  # the results stay readable after a chdir
        self._run = RunDirectory(self.directory)
        self._run.begin()  # a second writer of the directory is refused before any work
        self._final = self.directory / "records.jsonl"
        self._handle: BinaryIO | None = None  # opened with the first lines
        self._digest = hashlib.sha256()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.count = 0
        self._records: RecordsFile | None = None

    def _open(self) -> BinaryIO:
        """The staged ``records.jsonl``, created when the first results come."""
        if self._handle is None:
            self._handle = (self._run.staging() / "records.jsonl").open("wb")
        return self._handle

    def write(self, block: ResultBlock) -> None:
        data = block.utf8_lines()  # a lone surrogate repaired, and said (result_block)
        self._pending.append(data)
        self._pending_bytes += len(data)
        self.count += len(block)
        if self._pending_bytes >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        block = b"".join(self._pending)
        self._digest.update(block)
        self._open().write(block)
        self._pending.clear()
        self._pending_bytes = 0

    def records(self) -> RecordsFile:
        """The results written, as they will read once committed (every line is hashed)."""
        self._flush()
        if self._records is None:
            self._records = RecordsFile(self._final, self.count, self._digest.hexdigest())
        return self._records

    def commit(self, summary: dict[str, Any]) -> None:
        """Write ``conversations.jsonl`` and ``summary.json`` (with the records' digest)
        beside the staged ``records.jsonl``, then put the three in place in one step."""
        records = self.records()  # every line flushed and hashed
        handle = self._open()
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        staging = self._run.staging()
        staged = RecordsFile(staging / "records.jsonl", self.count, self._digest.hexdigest())
        # Each conversation summed up from its turns, before the summary that seals the run.
        write_conversations(staging, staged, summary.get("manifest", {}))
        document = {**summary, RECORDS_DIGEST: self._digest.hexdigest()}
        text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
        (staging / "summary.json").write_text(text + "\n", encoding="utf-8")
        self._run.commit()
        records.seal()

    def abort(self) -> None:
        """Drop what was written: the run did not finish, the directory stays as it was."""
        if self._handle is not None:
            self._handle.close()
        self._run.abort()


Sink = MemorySink | FileSink
