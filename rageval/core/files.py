"""Writing files so that a crash never leaves a torn one, with the permissions the user expects.

:func:`atomic_write` writes to a temporary file beside the target and renames it into place.
The temporary file's name carries the writer's machine and process id
(``.NAME.PID-N~HOST.tmp``), so the next
write into the same directory removes what a killed writer left behind, and never the file
of a writer that is still running. Written files get the permissions any other program's new
file would get (``0o666`` less the umask), not ``mkstemp``'s private ``0o600``.
A directory is cleaned once per process (the first write into it), which keeps many small
writes into one directory (an embedding cache) cheap.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write", "atomic_write_with", "clean_stale_temporaries", "creatable",
           "default_mode"]

_TEMPORARY = re.compile(
    r"^\.(?P<name>.+)\.(?P<pid>[0-9]+)(?:-[0-9]+)?(?:~(?P<host>[A-Za-z0-9_]+))?\.tmp$")
# This machine, in temporary names: a directory shared by several machines (a volume a
# cluster mounts) holds the temporaries of writers whose process ids mean nothing here.
_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"
_counter = iter(range(1 << 62))
_lock = threading.Lock()
_cleaned: set[str] = set()  # directories already cleaned by this process


def default_mode() -> int:
    """The permissions of a newly created file under the current umask."""
    # The umask can only be read by setting it; set it straight back (no file is created
    # in between, so nothing sees the temporary value).
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename; returns the path.

    Text is written as UTF-8. The directory must exist. The first write of a process into a
    directory removes the temporary files that writers which died left there.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    return atomic_write_with(path, lambda handle: handle.write(payload))


def atomic_write_with(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """:func:`atomic_write` for data written by ``write(handle)`` into the temporary file
    (a file too large to hold in memory at once); returns the path."""
    target = Path(path)
    temporary, handle = open_temporary(target)
    try:
        with handle:
            write(handle)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return target


def open_temporary(target: Path) -> tuple[Path, BinaryIO]:
    """A new temporary file beside ``target``, open for writing, to be renamed onto it (or
    removed); the next writer in that directory removes it if its process died first. The
    first temporary of a process in a directory removes those that dead writers left there."""
    with _lock:
        serial = next(_counter)
        first = str(target.parent.absolute()) not in _cleaned
        _cleaned.add(str(target.parent.absolute()))
    if first:
        clean_stale_temporaries(target.parent)
    temporary = target.with_name(f".{target.name}.{os.getpid()}-{serial}~{_HOST}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, default_mode())
    return temporary, os.fdopen(fd, "wb")


def clean_stale_temporaries(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files of :func:`atomic_write` whose writer is no longer running;
    returns what was removed (an unreadable directory removes nothing)."""
    removed: list[Path] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = _TEMPORARY.match(name)
        if match is None or match.group("host") not in (None, _HOST):
            continue  # another machine's writer: whether it is alive is not known here
        if _running(int(match.group("pid"))):
            continue
        stale = Path(directory) / name
        with contextlib.suppress(OSError):
            stale.unlink()
            removed.append(stale)
    return removed


def creatable(path: str | os.PathLike[str]) -> str | None:
    """Why directory ``path`` could not be created or written into (a phrase naming the
    culprit), or None when it can. Nothing is created: the nearest existing ancestor must be a
    writable directory.
    """
    target = Path(path).absolute()
    if target.exists():
        if not target.is_dir():
            return f"{target} is not a directory"
        return None if os.access(target, os.W_OK | os.X_OK) else f"{target} is not writable"
    for parent in (target, *target.parents):
        if parent.is_symlink() and not parent.exists():  # mkdir would meet it as a file
            return f"{parent} is a symbolic link to {os.readlink(parent)}, which does not exist"
        if parent.exists():
            if not parent.is_dir():
                return f"{parent} is not a directory"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"{parent} is not writable"
            return None
    return f"{target} has no existing parent directory"


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except OSError:
        return False
    return True
