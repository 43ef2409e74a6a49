"""Where the parity tests find trec_eval 10.0: its release archive (to build the real binary)
and its own test data. In order: the environment (``RAGEVAL_TREC_EVAL_TARBALL``,
``RAGEVAL_TREC_TEST_DIR``), a ``shared/`` folder beside the repository, and ``.trec_eval/``,
which ``python scripts/fetch_trec_eval.py`` fills (downloaded, every file checked)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FETCHED = ROOT / ".trec_eval"
FETCH = "python scripts/fetch_trec_eval.py"


def _first(variable: str, *candidates: Path) -> Path:
    given = os.environ.get(variable)
    if given:
        return Path(given)
    return next((path for path in candidates if path.exists()), candidates[-1])


TARBALL = _first("RAGEVAL_TREC_EVAL_TARBALL", ROOT.parent / "shared" / "trec_eval-10.0.tar.gz",
                 FETCHED / "trec_eval-10.0.tar.gz")
TEST_DIR = _first("RAGEVAL_TREC_TEST_DIR", ROOT.parent / "shared" / "trec_eval_test",
                  FETCHED / "test")


def missing(what: str, path: Path) -> str:
    """The skip reason of a test that needs ``what`` at ``path``: the command that fetches it."""
    return f"{what} not found at {path}: run `{FETCH}` to fetch trec_eval 10.0 (checked)"
