"""Where the per-record results of a run go as each batch finishes: a list in memory, or
``records.jsonl`` in a run directory, written as the run goes.

A run written as it goes stays atomic as a run: the lines go to a hidden temporary file beside
``records.jsonl`` while their SHA-256 is computed; only a finished run renames it into place
and then writes ``summary.json`` holding that digest (see
:meth:`~rageval.core.results.Results.write`). A run that fails removes the temporary file; one
killed on the way leaves it, which no reader of run directories looks at and the next writer
there removes, and an earlier run's pair stays intact.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, BinaryIO

from rageval.core.files import atomic_write, open_temporary
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
        self._final = self.directory / "records.jsonl"
        self._partial = self._final  # the temporary file, named when it is opened
        self._handle: BinaryIO | None = None  # opened with the first lines
        self._created: list[Path] = []  # the directories made for the run, deepest last
        self._digest = hashlib.sha256()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.count = 0
        self._records: RecordsFile | None = None

    def _open(self) -> BinaryIO:
        """The partial file, created with its directory when the first results come: a run
        that fails on its input leaves nothing behind."""
        if self._handle is None:
            missing = [p for p in (self.directory, *self.directory.parents) if not p.exists()]
            self.directory.mkdir(parents=True, exist_ok=True)
            self._created = missing[::-1]
            self._partial, self._handle = open_temporary(self._final)
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
        """Put ``records.jsonl`` in place, then ``summary.json`` with its digest."""
        records = self.records()  # every line flushed and hashed
        handle = self._open()
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        os.replace(self._partial, self._final)
        records.seal()
        # Each conversation summed up from its turns, before the summary that seals the run.
        write_conversations(self.directory, records, summary.get("manifest", {}))
        document = {**summary, RECORDS_DIGEST: self._digest.hexdigest()}
        text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
        atomic_write(self.directory / "summary.json", text + "\n")

    def abort(self) -> None:
        """Drop what was written: the run did not finish."""
        if self._handle is None:
            return
        self._handle.close()
        self._partial.unlink(missing_ok=True)
        for directory in reversed(self._created):  # those made for this run, if still empty
            try:
                directory.rmdir()
            except OSError:
                break


Sink = MemorySink | FileSink
