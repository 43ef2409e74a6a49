"""A run directory (``records.jsonl``, ``summary.json``, ``conversations.jsonl``) that changes
in one atomic step and is written by one process at a time.

A writer first takes the directory's lock: ``.NAME.lock`` beside it, held with ``flock`` for as
long as the writer runs, so that a killed writer never blocks the next one; a second writer is
refused at once, told which process holds it. It writes the new run's files into a hidden
staging directory beside the target (``.NAME.PID-N~HOST.run``), gives it what the target holds
that the run does not write (a user's files are hard-linked, or copied where they cannot be;
folders are moved), and exchanges the two in one ``renameat2(RENAME_EXCHANGE)``: at every
instant a reader finds the earlier run whole or the new one whole. What a writer killed on the
way leaves beside the target is put back in place (what the target lacks) and removed by the
next writer.

Where the target cannot be exchanged (a mount point, a parent directory that cannot be
written) the staging directory is made inside the target and the files are renamed into place
one by one, ``summary.json`` last; where the system lacks ``renameat2`` (not Linux, or a file
system that refuses it) the staged files are renamed the same way. ``summary.json`` holds the
digest of the ``records.jsonl`` written with it, so a pair torn there is refused by every
reader rather than read as one run.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import re
import shutil
from pathlib import Path

from rageval.core.errors import UsageError
from rageval.core.files import _HOST, _running, clean_stale_temporaries

__all__ = ["RUN_FILES", "RunDirectory", "RunDirectoryBusy", "identity"]

#: The files a run writes: never carried over from an earlier run into a new one.
RUN_FILES = ("records.jsonl", "summary.json", "conversations.jsonl")

_STAGING = re.compile(r"^\.(?P<name>.+)\.(?P<pid>[0-9]+)-[0-9]+~(?P<host>[A-Za-z0-9_]+)\.run$")
_INSIDE = ".rageval"  # the names used inside a target written in place
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class RunDirectoryBusy(UsageError):
    """Another process is writing the same run directory."""


class RunDirectory:
    """One write of a run directory: :meth:`begin` (the lock), :meth:`staging` (where the
    files go), then :meth:`commit` (the swap) or :meth:`abort` (nothing changes)."""

    def __init__(self, target: str | os.PathLike[str]) -> None:
        # Through a symbolic link to the directory it names: the link stays as it is.
        self.target = Path(os.path.realpath(Path(target).absolute()))
        self._lock_fd: int | None = None
        self._lock_path: Path | None = None
        self._created: list[Path] = []  # folders made for the run, outermost first
        self._staging: Path | None = None
        self._in_place = False

    # -- the lock -------------------------------------------------------------------------

    def begin(self) -> None:
        """Take the directory's lock (creating its missing parents; :meth:`abort` removes
        them), or raise :class:`RunDirectoryBusy` naming the process that holds it."""
        parent = self.target.parent
        missing = [p for p in (parent, *parent.parents) if not p.exists()]
        parent.mkdir(parents=True, exist_ok=True)
        self._created = missing[::-1]
        self._in_place = _must_write_in_place(self.target)
        if self._in_place:  # the lock is then inside the target, which must exist
            if not self.target.exists():
                self.target.mkdir()
                self._created.append(self.target)
            self._lock_path = self.target / f"{_INSIDE}.lock"
        else:
            self._lock_path = parent / f".{self.target.name}.lock"
        try:
            self._lock_fd = _lock(self._lock_path, self.target)
        except BaseException:
            self._remove_created()
            raise
        self._clean_stale()

    def _release(self) -> None:
        if self._lock_fd is None or self._lock_path is None:
            return
        # Removed while still held: a writer that opened it meanwhile sees it gone and tries
        # again with a new file (see _lock).
        with contextlib.suppress(OSError):
            self._lock_path.unlink()
        os.close(self._lock_fd)
        self._lock_fd = None

    # -- writing --------------------------------------------------------------------------

    def staging(self) -> Path:
        """The folder the new run's files are written into (made on first use)."""
        if self._staging is None:
            if self._lock_fd is None:
                self.begin()
            base = self.target if self._in_place else self.target.parent
            name = f"{_INSIDE}" if self._in_place else f".{self.target.name}"
            for serial in range(1 << 16):
                candidate = base / f"{name}.{os.getpid()}-{serial}~{_HOST}.run"
                try:
                    candidate.mkdir()
                except FileExistsError:
                    continue
                self._staging = candidate
                break
            else:  # pragma: no cover - 65,536 live staging folders of one process
                raise OSError(errno.EEXIST, "no free staging name", str(base))
            if self.target.is_dir():  # the new directory keeps the permissions of the old
                os.chmod(self._staging, self.target.stat().st_mode & 0o7777)
        return self._staging

    def commit(self) -> Path:
        """Put the staged run in place of the target in one step; returns the target."""
        staging = self.staging()
        try:
            if self._in_place:
                _rename_files(staging, self.target)
                staging.rmdir()
            elif not self.target.exists():
                os.rename(staging, self.target)
            else:
                self._swap(staging)
            _sync_directory(self.target.parent)
        except BaseException:
            self.abort()
            raise
        self._staging = None
        self._release()
        return self.target

    def _swap(self, staging: Path) -> None:
        clean_stale_temporaries(self.target)  # dead writers' temporaries are not carried
        folders = _carry_over(self.target, staging)
        for name in folders:  # moved last, the moment before the exchange
            os.rename(self.target / name, staging / name)
        was_cwd = _is_cwd(self.target)
        try:
            _exchange(staging, self.target)
        except OSError as error:
            if error.errno not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
                raise
            for name in folders:  # no renameat2 here: the files go in one by one
                os.rename(staging / name, self.target / name)
            _rename_files(staging, self.target)
            _restore_and_remove(staging, self.target)
            return
        if was_cwd:  # this process keeps working in the directory it was in (--out .)
            os.chdir(self.target)
        _restore_and_remove(staging, self.target)  # staging now holds the earlier run

    def abort(self) -> None:
        """Drop what was staged and the lock: the target stays as it was."""
        try:
            if self._staging is not None:  # what it holds of the user's goes back first
                if self.target.is_dir():
                    _restore_and_remove(self._staging, self.target)
                else:
                    shutil.rmtree(self._staging, ignore_errors=True)
                self._staging = None
        finally:
            self._release()
            self._remove_created()

    def _remove_created(self) -> None:
        for directory in reversed(self._created):  # those made for this run, if still empty
            try:
                directory.rmdir()
            except OSError:
                break
        self._created = []

    def _clean_stale(self) -> None:
        """Put back what killed writers left in their staging folders, then remove them
        (only the lock's holder does this, so no live writer's folder is touched)."""
        base = self.target if self._in_place else self.target.parent
        try:
            names = os.listdir(base)
        except OSError:
            return
        own = _INSIDE[1:] if self._in_place else self.target.name
        for name in names:
            match = _STAGING.match(name)
            if (match is None or match.group("name") != own
                    or match.group("host") != _HOST or _running(int(match.group("pid")))):
                continue
            if self.target.is_dir():
                _restore_and_remove(base / name, self.target)
            else:
                shutil.rmtree(base / name, ignore_errors=True)


def identity(directory: str | os.PathLike[str]) -> tuple[int, int] | None:
    """Which directory ``directory`` names now (device and inode; None when there is none):
    a reader of several files compares it before and after to know whether a run was swapped
    in meanwhile."""
    try:
        status = os.stat(directory)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _lock(path: Path, target: Path) -> int:
    """An open descriptor of ``path`` holding its exclusive ``flock``."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
            os.close(fd)
            who = (f"process {holder[0]} on {holder[1]}" if len(holder) == 2
                   else "another process")
            raise RunDirectoryBusy(
                f"{target}: {who} is writing a run into this directory; wait for it to "
                "finish or write this run elsewhere") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        # The holder may have finished and removed the file between our open and our lock:
        # a lock on a file no longer there guards nothing.
        if current is not None and os.path.samestat(current, os.fstat(fd)):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {_HOST}\n".encode(), 0)
            return fd
        os.close(fd)


def _must_write_in_place(target: Path) -> bool:
    """A target that cannot be exchanged: a mount point, or one whose parent this process
    cannot write."""
    parent = target.parent
    if parent == target:
        return True
    if target.is_dir() and os.path.ismount(target):
        return True
    return not os.access(parent, os.W_OK | os.X_OK)


def _carry_over(target: Path, staging: Path) -> list[str]:
    """Hard-link (or copy) into ``staging`` what ``target`` holds beside an earlier run's
    files; returns the folders, to be moved."""
    folders = []
    for entry in os.scandir(target):
        if entry.name in RUN_FILES or (staging / entry.name).exists():
            continue
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry.name)
            continue
        try:
            os.link(entry.path, staging / entry.name, follow_symlinks=False)
        except OSError:  # another user's file (protected hard links), too many links
            shutil.copy2(entry.path, staging / entry.name, follow_symlinks=False)
    return folders


def _restore_and_remove(old: Path, target: Path) -> None:
    """Move into ``target`` what ``old`` holds that the target lacks (a file written into the
    old directory during the swap, a folder a killed writer had moved), then remove ``old``
    with the earlier run's files."""
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(old):
            if entry.name in RUN_FILES or os.path.lexists(target / entry.name):
                continue
            with contextlib.suppress(OSError):
                os.rename(entry.path, target / entry.name)
    shutil.rmtree(old, ignore_errors=True)


def _rename_files(staging: Path, target: Path) -> None:
    """Rename the staged files into ``target`` one by one, ``summary.json`` last (its digest
    makes a pair torn before it a pair every reader refuses); a run without conversations
    removes an earlier run's ``conversations.jsonl``, which would pass for this run's."""
    names = sorted((name for name in os.listdir(staging) if name in RUN_FILES),
                   key=lambda name: name == "summary.json")
    if "conversations.jsonl" not in names:
        (target / "conversations.jsonl").unlink(missing_ok=True)
    for name in names:
        os.replace(staging / name, target / name)


def _exchange(first: Path, second: Path) -> None:
    """Swap two paths in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                 _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(second))


def _is_cwd(path: Path) -> bool:
    try:
        return os.path.samefile(os.getcwd(), path)
    except OSError:
        return False


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (where the system allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # a file system that cannot sync a directory
            os.fsync(fd)
    finally:
        os.close(fd)

