"""``rageval run EVAL.toml``: the scoring run an evaluation file writes down, with any option of
``rageval score`` given on the command line overriding the file's field."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any, TextIO

from rageval.config import read_eval_file
from rageval.core.errors import MissingDependencyError

# What a source named on the command line replaces among the file's inputs: the other kind of
# source and what only goes with it. A new records file keeps the file's kind and field map
# (they describe its columns) but not its format (read from the new name); a new run keeps the
# texts and judgments it is joined with; a new BEIR directory replaces the texts.
_REPLACES: dict[str, tuple[str, ...]] = {
    "records": ("run", "beir", "queries", "depth", "format"),
    "run": ("records", "input_format", "field_map", "format", "phoenix", "project",
            "references", "trace_unit", "trace_sessions", "phoenix_since", "phoenix_until"),
    "beir": ("queries", "corpus"),
    "phoenix": ("run", "beir", "queries", "depth", "format"),
}
_GATE = ("fail_under", "fail_over", "gate_on", "baseline", "max_drop", "allow_data_change")


def run_eval_file(args: argparse.Namespace, out: TextIO) -> int:
    from rageval.cli.commands import run_score
    from rageval.cli.score_options import score_defaults

    given = {k: v for k, v in vars(args).items() if k not in ("command", "eval_file", "handler")}
    loaded = read_eval_file(args.eval_file)
    from_file = dict(loaded.options)
    for source, replaced in _REPLACES.items():
        if source in given:
            for key in (source, *replaced):
                from_file.pop(key, None)
    if from_file.get("input_format") != "trec-rag" and "records" in given:
        from_file.pop("corpus", None)  # a corpus goes with a run or a TREC RAG file only
    if given.pop("no_gate", False):
        for key in _GATE:
            from_file.pop(key, None)
            given.pop(key, None)
    optional = from_file.pop("optional_metrics", [])
    if "metrics" in given:  # metrics named on the command line are the whole list
        optional = []
    settings = {"records": None, **score_defaults()}
    settings.update(from_file)
    settings.update(given)
    if settings.get("records") and settings.get("phoenix") and not settings.get(
            "phoenix_annotate"):  # the server was where a traces file's scores go: not now
        for key in ("phoenix", "project", "phoenix_since", "phoenix_until"):
            settings[key] = None
    settings["metrics"] = [*(settings.get("metrics") or []), *_installed(optional)]
    settings["eval_file"] = _file_entry(loaded.path)
    return run_score(argparse.Namespace(**settings), out)


def _installed(names: list[str]) -> list[str]:
    """The optional metrics whose dependencies are installed; a note on stderr for the others."""
    from rageval.core.metric import ScoreOptions
    from rageval.core.registry import create

    kept = []
    for name in names:
        try:
            create(name, ScoreOptions())
        except MissingDependencyError as missing:
            print(f"rageval: note: optional metric {name} skipped: {missing}", file=sys.stderr)
            continue
        kept.append(name)
    return kept


def _file_entry(path: Path) -> dict[str, Any]:
    """What the manifest records of the evaluation file: where it was and what it held."""
    return {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
