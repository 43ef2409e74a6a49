"""A command runs with fewer cyclic garbage collections (a run's objects live until it ends),
and the collector is left as it was found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"


def test_a_command_runs_with_fewer_collections_and_puts_the_threshold_back(
        tmp_path: Path) -> None:
    """The collector's first threshold is raised while a command runs (a long run allocates
    millions of objects that live until it ends) and put back after, even on an error."""
    import gc

    from rageval.cli import main
    from rageval.cli import parser as cli_parser

    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    original = cli_parser._dispatch

    def dispatch(args: Any, out: Any) -> int:
        seen.append(gc.get_threshold())
        return original(args, out)

    cli_parser._dispatch = dispatch  # type: ignore[assignment]
    try:
        assert main(["score", str(DEMO), "-m", "rouge1", "--out", str(tmp_path / "out"),
                     "--no-progress"]) == 0
        assert main(["score", str(tmp_path / "missing.jsonl"), "-m", "rouge1", "--out",
                     str(tmp_path / "out2"), "--no-progress"]) == 2
    finally:
        cli_parser._dispatch = original  # type: ignore[assignment]
    assert [s[0] for s in seen] == [max(before[0], cli_parser._FIRST_GENERATION)] * 2
    assert gc.get_threshold() == before
