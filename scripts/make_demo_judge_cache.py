"""Rebuild ``fixtures/demo/judge_cache.jsonl``, the judge replies the README demo replays.

The replies come from the deterministic *scripted* judge server of the test suite
(``tests/judge_server.py``), not from a language model: each score is a hash of the prompt mapped
onto the rubric's scale, and each reasoning just says so. They exist so that the demo shows the
judge's whole path (rubric rendering, cache keys, offline replay, summary, signatures) with no
API key and no network. Do not read anything into the numbers.

    python scripts/make_demo_judge_cache.py            # rewrite the fixture
    python scripts/make_demo_judge_cache.py --check    # exit 1 if the fixture is out of date

The export is made byte-reproducible: the random loopback port and the storage times are
normalised (neither is part of a cache key).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from judge_server import JudgeServer  # noqa: E402

from rageval.judge.cache import JudgeCache  # noqa: E402
from rageval.judge.metric import JudgeOptions  # noqa: E402
from rageval.orchestrator import evaluate  # noqa: E402

RECORDS = ROOT / "fixtures" / "demo" / "records.jsonl"
FIXTURE = ROOT / "fixtures" / "demo" / "judge_cache.jsonl"
MODEL = "scripted-judge"
ENDPOINT = "scripted-judge.invalid"
CRITERIA = ["judge:faithfulness", "judge:correctness", "judge:context_relevance"]


def build() -> str:
    """The fixture's text: every reply the demo needs, asked of the scripted judge."""
    with tempfile.TemporaryDirectory() as tmp, JudgeServer() as server:
        cache = Path(tmp) / "cache.sqlite"
        options = JudgeOptions(model=MODEL, base_url=server.base_url, cache=str(cache),
                               concurrency=4)
        evaluate(str(RECORDS), CRITERIA, judge=options, bootstrap=1)
        with JudgeCache(cache) as store:
            entries = [entry.to_json() for entry in store.entries()]
    lines = []
    for entry in entries:
        entry["created"] = 0.0
        entry["request"]["endpoint"] = ENDPOINT
        lines.append(json.dumps(entry, sort_keys=True, ensure_ascii=False,
                                separators=(",", ":")) + "\n")
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed fixture instead of writing it")
    args = parser.parse_args()
    text = build()
    if args.check:
        same = FIXTURE.exists() and FIXTURE.read_text(encoding="utf-8") == text
        print(f"{FIXTURE}: {'up to date' if same else 'OUT OF DATE'}")
        return 0 if same else 1
    FIXTURE.write_text(text, encoding="utf-8")
    print(f"wrote {len(text.splitlines())} replies to {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
