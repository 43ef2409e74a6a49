"""A run killed (``kill -9``) while it writes over an earlier run, and two runs writing the same
directory at once: every reader (``rageval report``, ``compare``, ``export``) then finds a
whole pair, the earlier run's or the new one's, and the second writer is refused."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rageval.cli import main
from rageval.core.results import Results

ROOT = Path(__file__).resolve().parents[2]


def conversations(path: Path, turns: int, *, seed: int, per_conversation: int = 4) -> Path:
    """``turns`` turns in conversations of ``per_conversation``, graded so that two seeds give
    two runs with different values."""
    lines = []
    for c in range(turns // per_conversation):
        steps = [{"query": f"q{c}.{t}",
                  "contexts": [{"id": f"d{d}", "text": "t"} for d in (1, 2, 3)],
                  "judgments": {f"d{1 + (c * 7 + t + seed) % 3}": 1}}
                 for t in range(per_conversation)]
        lines.append(json.dumps({"id": f"c{c}", "turns": steps}))
    path.write_text("\n".join(lines) + "\n")
    return path


def score_argv(records: Path, out: Path) -> list[str]:
    return ["score", str(records), "-m", "mrr", "-m", "p@1", "--bootstrap", "10",
            "--no-progress", "--out", str(out)]


def spawn(argv: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    command = "import sys; from rageval.cli import main; sys.exit(main())"
    return subprocess.Popen([sys.executable, "-c", command, *argv], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def which_run(out: Path, runs: dict[str, dict[str, float | None]], tmp: Path, *,
              every_reader: bool = True) -> str:
    """The name of the run ``out`` holds whole, once every reader has read it."""
    loaded = Results.load(out)  # refuses a pair not written together
    values = {name: item.value for name, item in loaded.summary.items()}
    [name] = [name for name, known in runs.items() if known == values]
    if (out / "conversations.jsonl").exists():
        rows = (out / "conversations.jsonl").read_text().splitlines()
        assert len(rows) == loaded.manifest["conversations"]["count"]
    sink = io.StringIO()
    if every_reader:  # each reads the pair as Results.load does, and refuses a torn one
        assert main(["compare", str(runs_dir(tmp)), str(out), "--intersect"],
                    stdout=sink) == 0
        assert main(["report", str(out), "-o", str(tmp / "r.html")], stdout=sink) == 0
    assert main(["export", str(out), "--format", "junit", "-o", str(tmp / "e.xml")],
                stdout=sink) == 0
    return name


def runs_dir(tmp: Path) -> Path:
    return tmp / "earlier-copy"


def staged_bytes(out: Path) -> int:
    """How much of ``records.jsonl`` a run writing ``out`` has written so far."""
    return sum(p.stat().st_size for p in out.parent.glob(f".{out.name}.*.run/records.jsonl")
               if p.exists())


def kill_when(proc: subprocess.Popen[str], out: Path, size: int, *,
              in_place: bool = False) -> None:
    """Kill ``proc`` once it has written ``size`` bytes of records (``in_place``: once its
    records of ``size`` bytes are in ``out``), or when it has ended."""
    def reached() -> bool:
        if not in_place:
            return staged_bytes(out) >= size
        with contextlib.suppress(OSError):
            return (out / "records.jsonl").stat().st_size == size
        return False

    while proc.poll() is None and not reached():
        time.sleep(0.002)
    proc.kill()
    proc.wait()


def killed_at_points(tmp_path: Path, turns: int, points: int, *,
                     readers_every: int = 1) -> list[str]:
    """Score ``turns`` turns over an earlier run, killed at ``points`` evenly spaced points of
    the records it writes (the last once they are all written, as the rest of the run's files
    are written and swapped in); the name of the run each kill left (``earlier`` or ``new``)."""
    out = tmp_path / "out"
    earlier = conversations(tmp_path / "earlier.jsonl", turns // 2, seed=0)
    new = conversations(tmp_path / "new.jsonl", turns, seed=1)
    runs: dict[str, dict[str, float | None]] = {}
    assert main(score_argv(new, out), stdout=io.StringIO()) == 0
    runs["new"] = {n: s.value for n, s in Results.load(out).summary.items()}
    size = (out / "records.jsonl").stat().st_size
    assert main(score_argv(earlier, out), stdout=io.StringIO()) == 0
    runs["earlier"] = {n: s.value for n, s in Results.load(out).summary.items()}
    shutil.copytree(out, runs_dir(tmp_path))
    (out / "notes.md").write_text("the user's own file")
    seen: list[str] = []
    for point in range(1, points + 1):
        if not seen or seen[-1] == "new":  # each kill is over the earlier run
            shutil.rmtree(out)
            shutil.copytree(runs_dir(tmp_path), out)
            (out / "notes.md").write_text("the user's own file")
        kill_when(spawn(score_argv(new, out)), out, size * point // points)
        seen.append(which_run(out, runs, tmp_path,
                              every_reader=point % readers_every == 0))
        assert (out / "notes.md").read_text() == "the user's own file"
    # Killed once the new run is in place, as the earlier one is being removed.
    shutil.rmtree(out)
    shutil.copytree(runs_dir(tmp_path), out)
    (out / "notes.md").write_text("the user's own file")
    kill_when(spawn(score_argv(new, out)), out, size, in_place=True)
    seen.append(which_run(out, runs, tmp_path))
    assert (out / "notes.md").read_text() == "the user's own file"
    # The next run cleans what the killed ones left beside the directory.
    assert main(score_argv(earlier, out), stdout=io.StringIO()) == 0
    assert which_run(out, runs, tmp_path) == "earlier"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert (out / "notes.md").read_text() == "the user's own file"
    return seen


def test_a_run_killed_at_any_point_leaves_a_whole_pair(tmp_path: Path) -> None:
    seen = killed_at_points(tmp_path, 10_000, 3)
    assert seen[:2] == ["earlier", "earlier"] and seen[-1] == "new"


@pytest.mark.slow
def test_a_long_run_killed_at_twenty_points_leaves_a_whole_pair(tmp_path: Path) -> None:
    seen = killed_at_points(tmp_path, 100_000, 20, readers_every=5)
    print("what each kill left:", seen)
    assert seen[:19] == ["earlier"] * 19  # killed while the records were being written
    assert seen[19] in ("earlier", "new")  # or as the run's other files were
    assert seen[20] == "new"  # or once the run was in place


def test_a_second_writer_is_refused_and_the_first_writes_a_whole_pair(tmp_path: Path) -> None:
    out = tmp_path / "out"
    records = conversations(tmp_path / "r.jsonl", 20_000, seed=0)
    first = spawn(score_argv(records, out))
    deadline = time.monotonic() + 60
    while not (tmp_path / ".out.lock").exists() and first.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    second = spawn(score_argv(records, out))
    _, err = second.communicate()
    assert second.returncode == 2, err
    assert f"{out}: process {first.pid} on " in err and "is writing a run" in err
    assert "Traceback" not in err
    assert first.wait() == 0
    Results.load(out)
    assert main(["export", str(out), "--format", "json", "-o", str(tmp_path / "e.json")],
                stdout=io.StringIO()) == 0
