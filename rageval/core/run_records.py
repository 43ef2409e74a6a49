"""The per-record results of a run written to its directory as it went, read back from
``records.jsonl`` when asked for, and only as long as the file is still the one the run wrote:
the run's digest is checked as the file is read, so a later run written to the same directory
never passes for this one (its records under this run's summary)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, overload

from rageval.core.errors import InputError
from rageval.core.files import open_temporary
from rageval.core.results import RecordResult, record_result

_BLOCK = 1 << 20


class RecordsFile(Sequence[RecordResult]):
    """``count`` record results in ``path``, whose bytes hash to ``digest`` (SHA-256):
    iterating streams the file; indexing reads it whole, once."""

    def __init__(self, path: str | os.PathLike[str], count: int, digest: str) -> None:
        self.path = Path(path).absolute()
        self.digest = digest
        self._count = count
        self._loaded: list[RecordResult] | None = None

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[RecordResult]:
        if self._loaded is not None:
            yield from self._loaded
            return
        hashed = hashlib.sha256()
        with self._open() as handle:
            for number, raw in enumerate(handle, 1):
                hashed.update(raw)
                line = raw.decode("utf-8")
                if line.strip():
                    yield record_result(line, self.path, number)
        self._check(hashed.hexdigest())

    @overload
    def __getitem__(self, index: int) -> RecordResult: ...
    @overload
    def __getitem__(self, index: slice) -> list[RecordResult]: ...
    def __getitem__(self, index: int | slice) -> RecordResult | list[RecordResult]:
        if self._loaded is None:
            self._loaded = list(iter(self))
        return self._loaded[index]

    def copy_to(self, target: Path) -> str:
        """Copy the file to ``target`` (atomically; nothing to do when it is the same file)
        and return its digest, checked against the run's."""
        if target.exists() and os.path.samefile(self.path, target):
            # Not read again: were the file another run's by now, the summary written with
            # this digest would make Results.load refuse the pair, as it should.
            return self.digest
        temporary, out = open_temporary(target)
        try:
            hashed = hashlib.sha256()
            with out, self._open() as handle:
                for block in iter(lambda: handle.read(_BLOCK), b""):
                    hashed.update(block)
                    out.write(block)
            self._check(hashed.hexdigest())
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return self.digest

    def _open(self) -> BinaryIO:
        try:
            return self.path.open("rb")
        except OSError as error:
            raise InputError(f"the run's records are gone: {error.strerror}",
                             path=str(self.path)) from None

    def _check(self, digest: str) -> None:
        if digest != self.digest:
            raise InputError("records.jsonl is no longer the one this run wrote (another run "
                             "was written to the same directory since)", path=str(self.path))
