"""The per-record results of a run written to its directory as it went, read back from
``records.jsonl`` when asked for, and only as long as the file is still the one the run wrote:
the run's digest is checked as the file is read, so a later run written to the same directory
never passes for this one (its records under this run's summary)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, overload

from rageval.core.errors import InputError
from rageval.core.files import open_temporary
from rageval.core.results import RecordResult, Results, read_summary, record_result

_BLOCK = 1 << 20


class RecordsFile(Sequence[RecordResult]):
    """``count`` record results in ``path``, whose bytes hash to ``digest`` (SHA-256):
    iterating streams the file; indexing reads it whole, once."""

    def __init__(self, path: str | os.PathLike[str], count: int, digest: str | None) -> None:
        self.path = Path(path).absolute()
        self.digest = digest
        # The file as the run left it (device, inode, size, modification time), once it is
        # in place: a file that differs is refused before a line of it is read.
        self.stamp: tuple[int, int, int, int] | None = None
        self._count = count
        self._loaded: list[RecordResult] | None = None

    def seal(self) -> None:
        """Note the file as it is now (the run has just put it in place)."""
        self.stamp = _stamp(os.stat(self.path))

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
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise InputError(f"not UTF-8: {error.reason}", path=str(self.path),
                                     line=number) from None
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
        if target.exists() and self.path.exists() and os.path.samefile(self.path, target):
            if (self.digest is not None and self.stamp is not None
                    and _stamp(os.stat(target)) == self.stamp):
                return self.digest  # known unchanged since the run put it in place
            with self._open() as handle:
                hashed = hashlib.sha256()
                for block in iter(lambda: handle.read(_BLOCK), b""):
                    hashed.update(block)
            self._check(hashed.hexdigest())
            return hashed.hexdigest()
        if self._unchanged():  # the same bytes under a second name, nothing to copy
            with contextlib.suppress(OSError):
                os.link(self.path, target)
                return self.digest  # type: ignore[return-value]  # known when unchanged
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
        return hashed.hexdigest()

    def _unchanged(self) -> bool:
        """Whether the file is known to be as the run left it (digest and stamp known)."""
        if self.digest is None or self.stamp is None:
            return False
        try:
            return _stamp(os.stat(self.path)) == self.stamp
        except OSError:
            return False

    def _open(self) -> BinaryIO:
        try:
            handle = self.path.open("rb")
        except OSError as error:
            raise InputError(f"the run's records are gone: {error.strerror}",
                             path=str(self.path)) from None
        if self.stamp is not None and _stamp(os.fstat(handle.fileno())) != self.stamp:
            handle.close()
            self._check("")  # another run's file: refused before any line is read
        return handle

    def _check(self, digest: str) -> None:
        if self.digest is not None and digest != self.digest:
            raise InputError("records.jsonl is no longer the one this run wrote (another run "
                             "was written to the same directory since)", path=str(self.path))


def open_run(run_dir: str | os.PathLike[str]) -> Results:
    """A run directory written by ``rageval score --out DIR``, its records left on disk: they
    are read (and checked against the summary's digest) each time they are iterated, for
    work that streams them (a comparison of runs too long to hold)."""
    summary, manifest, digest = read_summary(run_dir)
    path = Path(run_dir) / "records.jsonl"
    with path.open("rb") as handle:
        count = sum(block.count(b"\n") for block in iter(lambda: handle.read(_BLOCK), b""))
    return Results(RecordsFile(path, count, digest), summary, manifest)


def _stamp(status: os.stat_result) -> tuple[int, int, int, int]:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
