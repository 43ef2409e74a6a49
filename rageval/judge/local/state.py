"""What became of a local judge server: its end told in words, and a note of it for other
processes.

A server that dies takes its reasons with it: a judge run sees only a refused connection, and
``rageval local-judge`` only an exit status such as -4. :func:`describe_exit` turns a status
into words (the signal's name and its likely cause, SIGILL above all: a llama.cpp build for
instructions this machine refuses), and :func:`log_tail` adds the server's last lines.

While a local judge serves, a small note (pid, log, port) lies in a private directory of the
user's (``$XDG_RUNTIME_DIR/rageval/local-judge`` or ``~/.cache/rageval/local-judge``, mode
0700), and its end is written into it. A note is believed only while nothing listens on its port
again and, once its server is gone, for :data:`NOTE_LIFETIME_S`: a port refused later is
another server's business. A judge run whose connection to a loopback endpoint fails asks
:func:`diagnose` about that port, so it reports "the local judge ... was killed by SIGILL"
rather than "Connection error". Local judges of this process answer from memory, without a
note.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

__all__ = ["describe_exit", "diagnose", "forget", "log_tail", "note_end", "note_start",
           "state_dir"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
NOTE_LIFETIME_S = 15 * 60
_TAIL_LINES = 12
_TAIL_CHARS = 2000
REBUILD = "python -m rageval.judge.local.build --install --force"

# Likely causes, by signal: what a user can do about each.
_CAUSES = {
    signal.SIGILL: ("an illegal instruction: llama-cpp-python was built for instructions this "
                    f"machine refuses (AMX or AVX-512 listed by the CPU but not enabled); "
                    f"rebuild it for this machine: {REBUILD}"),
    signal.SIGKILL: ("killed outright, most often by the kernel's out-of-memory killer (see "
                     "dmesg), or by kill -9"),
    signal.SIGSEGV: ("a memory fault inside llama.cpp: a damaged or unsupported GGUF file, or "
                     "a broken build (try the rebuild: " + REBUILD + ")"),
    signal.SIGBUS: "a bus error: the GGUF file was changed or truncated while mapped",
    signal.SIGABRT: "llama.cpp aborted on a failed check: its log below says which",
    signal.SIGFPE: "an arithmetic fault inside llama.cpp",
    signal.SIGTERM: "stopped by another process (SIGTERM)",
    signal.SIGINT: "interrupted (Ctrl-C)",
    signal.SIGHUP: "its terminal closed",
}


class _Server(Protocol):
    host: str
    port: int
    log_path: Path | None

    def exit_status(self) -> int | None: ...


_IN_PROCESS: dict[tuple[str, int], _Server] = {}


def describe_exit(status: int) -> str:
    """An exit status in words: ``killed by SIGILL (...)`` or ``exited with status 1``."""
    if status >= 0:
        return f"exited with status {status}"
    try:
        sig = signal.Signals(-status)
    except ValueError:
        return f"was killed by signal {-status}"
    cause = _CAUSES.get(sig)
    return f"was killed by {sig.name}" + (f": {cause}" if cause else "")


def log_tail(path: Path | None, lines: int = _TAIL_LINES) -> str:
    """The last lines of a server's log, or why there are none."""
    if path is None:
        return "(no log)"
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError as exc:
        return f"(its log {path} cannot be read: {exc.strerror})"
    if not text:
        return "(its log is empty)"
    tail = "\n".join(text.splitlines()[-lines:])[-_TAIL_CHARS:]
    return f"last lines of its log ({path}):\n{tail}"


def state_dir(create: bool = True) -> Path:
    """The private directory of local judge notes (created 0700; refused if someone else's)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path.home() / ".cache"
    folder = base / "rageval" / "local-judge"
    if create:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if folder.is_symlink() or info.st_uid != os.getuid():
        raise OSError(f"{folder} is not a private directory of this user")
    return folder


def _note_path(port: int, create: bool = True) -> Path:
    return state_dir(create) / f"port-{port}.json"


def note_start(server: _Server, pid: int) -> None:
    """Remember a started server, in this process and in its note for others."""
    _IN_PROCESS[(server.host, server.port)] = server
    _write_note(server.port, {"host": server.host, "port": server.port, "pid": pid,
                              "owner": os.getpid(), "log": str(server.log_path), "end": None})


def note_end(server: _Server, words: str) -> None:
    """Record how a server ended (read back by :func:`diagnose` in other processes)."""
    with contextlib.suppress(OSError, ValueError):
        path = _note_path(server.port)
        note = json.loads(path.read_text(encoding="utf-8"))
        if note.get("owner") == os.getpid():
            note["end"] = words
            _write_note(server.port, note)


def forget(server: _Server) -> None:
    """A server stopped on purpose: nothing to diagnose any more."""
    _IN_PROCESS.pop((server.host, server.port), None)
    with contextlib.suppress(OSError, ValueError):
        path = _note_path(server.port)
        if json.loads(path.read_text(encoding="utf-8")).get("owner") == os.getpid():
            path.unlink()


def _write_note(port: int, note: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        path = _note_path(port)
        temp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(note, out)
        os.replace(temp, path)


def diagnose(base_url: str) -> str | None:
    """Why a loopback judge endpoint does not answer, when it is (or was) a local judge that
    ended; None when nothing is known."""
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if host is None or port is None or host not in _LOOPBACK or _listening(host, port):
        return None  # something answers there now: not a local judge that is gone
    for (h, p), server in list(_IN_PROCESS.items()):
        if p == port and (h == host or {h, host} <= set(_LOOPBACK)):
            status = server.exit_status()
            if status is not None:
                return (f"the local judge on port {port} {describe_exit(status)}; "
                        f"{log_tail(server.log_path)}")
    return _from_note(port)


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=1):
            return True
    except OSError:
        return False


def _from_note(port: int) -> str | None:
    try:
        path = _note_path(port, create=False)
        note = json.loads(path.read_text(encoding="utf-8"))
        age = time.time() - path.stat().st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict) or (age > NOTE_LIFETIME_S and not _alive(note.get("pid"))):
        return None
    log = Path(str(note["log"])) if note.get("log") else None
    if note.get("end"):
        return f"the local judge on port {port} {note['end']}; {log_tail(log)}"
    if not _alive(note.get("pid")):
        return (f"the local judge on port {port} (pid {note.get('pid')}) is no longer "
                f"running; {log_tail(log)}")
    return None


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
