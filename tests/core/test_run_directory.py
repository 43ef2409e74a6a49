"""A run directory changes in one step and has one writer at a time
(rageval.core.outputs.run_directory)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rageval.core.outputs import run_directory
from rageval.core.outputs.run_directory import RunDirectory, RunDirectoryBusy


def write_run(target: Path, tag: str, *, conversations: bool = False) -> Path:
    run = RunDirectory(target)
    run.begin()
    staging = run.staging()
    (staging / "records.jsonl").write_text(f"records {tag}\n")
    if conversations:
        (staging / "conversations.jsonl").write_text(f"conversations {tag}\n")
    (staging / "summary.json").write_text(f"summary {tag}\n")
    return run.commit()


def pair(target: Path) -> tuple[str, str]:
    return ((target / "records.jsonl").read_text(), (target / "summary.json").read_text())


def hidden_beside(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith("."))


def test_a_new_directory_is_written_whole_and_nothing_is_left_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "run"
    assert write_run(target, "a") == target
    assert pair(target) == ("records a\n", "summary a\n")
    assert sorted(p.name for p in target.iterdir()) == ["records.jsonl", "summary.json"]
    assert hidden_beside(target) == []


def test_a_replaced_run_keeps_the_users_files_and_drops_the_old_runs(tmp_path: Path) -> None:
    target = tmp_path / "run"
    write_run(target, "a", conversations=True)
    (target / "notes.txt").write_text("mine")
    (target / "report.html").write_text("<html>")
    (target / "plots").mkdir()
    (target / "plots" / "p.png").write_bytes(b"png")
    (target / "link").symlink_to("notes.txt")
    os.chmod(target, 0o750)
    write_run(target, "b")
    assert pair(target) == ("records b\n", "summary b\n")
    assert not (target / "conversations.jsonl").exists()  # would pass for the new run's
    assert (target / "notes.txt").read_text() == "mine"
    assert (target / "report.html").read_text() == "<html>"
    assert (target / "plots" / "p.png").read_bytes() == b"png"
    assert os.readlink(target / "link") == "notes.txt"
    assert (target.stat().st_mode & 0o777) == 0o750
    assert hidden_beside(target) == []


def test_a_second_writer_is_refused_and_named(tmp_path: Path) -> None:
    target = tmp_path / "run"
    first = RunDirectory(target)
    first.begin()
    with pytest.raises(RunDirectoryBusy, match=rf"process {os.getpid()} on .* is writing"):
        RunDirectory(target).begin()
    first.abort()
    write_run(target, "b")  # the lock is gone with its writer
    assert pair(target) == ("records b\n", "summary b\n")
    assert hidden_beside(target) == []


def test_a_killed_writer_never_blocks_the_next(tmp_path: Path) -> None:
    target = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from rageval.core.outputs.run_directory import RunDirectory
            run = RunDirectory({str(target)!r}); run.begin()
            (run.staging() / "records.jsonl").write_text("half")
            print("locked", flush=True); time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(RunDirectoryBusy, match=rf"process {holder.pid} "):
            RunDirectory(target).begin()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    write_run(target, "b")
    assert pair(target) == ("records b\n", "summary b\n")
    assert hidden_beside(target) == []  # its staging folder removed by the next writer


def test_a_lock_file_removed_between_open_and_lock_is_taken_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer that held the lock finished (and removed the file) after this one opened
    it: a lock on the removed file would guard nothing, so the file is opened again."""
    target = tmp_path / "run"
    real = run_directory.fcntl.flock
    calls = []

    def holder_finishes_first(fd: int, operation: int) -> None:
        if not calls:
            (tmp_path / ".run.lock").unlink()
        calls.append(fd)
        real(fd, operation)

    monkeypatch.setattr(run_directory.fcntl, "flock", holder_finishes_first)
    run = RunDirectory(target)
    run.begin()
    assert len(calls) == 2
    monkeypatch.setattr(run_directory.fcntl, "flock", real)
    with pytest.raises(RunDirectoryBusy):
        RunDirectory(target).begin()  # the file now there is the one held
    run.abort()


def test_what_a_killed_writer_moved_aside_is_put_back(tmp_path: Path) -> None:
    target = tmp_path / "run"
    write_run(target, "a")
    # Killed between moving the user's folder into its staging folder and the swap.
    stale = tmp_path / ".run.999999999-0~x.run"
    stale.mkdir()
    (stale / "records.jsonl").write_text("records of the killed run")
    (stale / "data").mkdir()
    (stale / "data" / "f").write_text("the user's")
    stale = stale.rename(tmp_path / f".run.999999999-0~{run_directory._HOST}.run")
    write_run(target, "b")
    assert (target / "data" / "f").read_text() == "the user's"
    assert pair(target) == ("records b\n", "summary b\n")
    assert not stale.exists()


def test_a_run_written_into_the_current_directory(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "here"
    target.mkdir()
    (target / "mine.txt").write_text("x")
    monkeypatch.chdir(target)
    write_run(Path("."), "a")
    assert os.path.samefile(os.getcwd(), target)  # this process follows the new directory
    assert pair(Path(".")) == ("records a\n", "summary a\n")
    assert Path("mine.txt").read_text() == "x"


def test_a_symbolic_link_stays_and_its_directory_gets_the_run(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write_run(real, "a")
    link = tmp_path / "link"
    link.symlink_to(real)
    write_run(link, "b")
    assert link.is_symlink() and pair(real) == ("records b\n", "summary b\n")


def test_an_aborted_write_changes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "run"
    write_run(target, "a")
    run = RunDirectory(target)
    run.begin()
    (run.staging() / "records.jsonl").write_text("half")
    run.abort()
    assert pair(target) == ("records a\n", "summary a\n")
    assert hidden_beside(target) == []
    fresh = RunDirectory(tmp_path / "new" / "run")
    fresh.begin()
    fresh.staging()
    fresh.abort()
    assert not (tmp_path / "new").exists()


def test_without_renameat2_the_files_are_renamed_summary_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "run"
    write_run(target, "a", conversations=True)
    (target / "mine").write_text("x")

    def unavailable(first: Path, second: Path) -> None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")

    renamed: list[str] = []
    real = os.replace

    def noting(source: str | Path, destination: str | Path) -> None:
        renamed.append(Path(destination).name)
        real(source, destination)

    monkeypatch.setattr(run_directory, "_exchange", unavailable)
    monkeypatch.setattr(run_directory.os, "replace", noting)
    write_run(target, "b")
    assert renamed == ["records.jsonl", "summary.json"]
    assert pair(target) == ("records b\n", "summary b\n")
    assert (target / "mine").read_text() == "x"
    assert not (target / "conversations.jsonl").exists()
    assert hidden_beside(target) == []


def test_a_directory_that_cannot_be_swapped_is_written_in_place_under_its_own_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mount point, or a parent that cannot be written: the lock and the staging folder are
    inside the directory, and the files renamed into it one by one."""
    monkeypatch.setattr(run_directory, "_must_write_in_place", lambda target: True)
    target = tmp_path / "run"
    write_run(target, "a", conversations=True)
    (target / "mine").write_text("x")
    inode = target.stat().st_ino
    run = RunDirectory(target)
    run.begin()
    assert (target / ".rageval.lock").exists() and hidden_beside(target) == []
    with pytest.raises(RunDirectoryBusy):
        RunDirectory(target).begin()
    (run.staging() / "records.jsonl").write_text("records b\n")
    (run.staging() / "summary.json").write_text("summary b\n")
    run.commit()
    assert target.stat().st_ino == inode  # the same directory
    assert pair(target) == ("records b\n", "summary b\n")
    assert sorted(p.name for p in target.iterdir()) == ["mine", "records.jsonl", "summary.json"]
