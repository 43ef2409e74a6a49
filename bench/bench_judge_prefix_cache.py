"""Benchmark: the share of a judge run's prompt tokens a provider's prefix cache reuses.

``rageval score`` as a user runs it (a child process), ``judge:faithfulness`` and
``judge:correctness`` on ``--records`` records, on an empty cache, against the scripted loopback
judge of the test suite in prefix-cache mode (``JudgeServer.cache_prefixes``): it tokenises
each prompt deterministically (words and punctuation of the chat-template text), keeps the
prefixes it has seen in 128-token steps and reports ``usage.prompt_tokens_details.cached_tokens``
as OpenAI does. Printed: the share of prompt tokens reported cached, as the server counted it
and as rageval's manifest reports it (``prompt_cache.share``), with no minimum prompt length
and with OpenAI's minimum of 1,024 tokens, for the previous prompt layout (``--base``: a git
revision, by default the parent of the commit that moved the reply instructions ahead of the
record; or ``--base-source DIR``, a checkout) and this checkout's, side by side.

``--llama`` adds a run of the same command against llama-cpp-python's server, the local judge
(SmolLM2-135M-Instruct, as ``rageval local-judge`` starts it, whose prompt cache is on by
default), on ``--llama-records`` records: what it reports of its prompt cache (needs the
``local`` extra).

    python bench/bench_judge_prefix_cache.py [--records 200] [--base REV | --base-source DIR]
                                             [--llama] [--llama-records 16] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

from bench_proc import rageval_command  # noqa: E402
from judge_server import JudgeServer  # noqa: E402

METRICS = ["judge:faithfulness", "judge:correctness"]
_LAYOUT_COMMIT = ["git", "log", "-1", "--format=%H", "-G", 'RENDER_VERSION = "3"', "--",
                  "rageval/judge/rubric/render.py"]


def write_records(path: Path, n: int) -> None:
    """Records shaped like a retrieval-augmented answer: a query, three retrieved passages of a
    few sentences, an answer and a reference, each distinct."""
    rows = []
    for i in range(n):
        passages = [
            f"Annual report {i}, section {k}: revenue in region {k} grew by {(i + k) % 17} "
            f"percent in the fiscal year, driven by services contracts and {i % 5} new "
            f"distribution partners. Operating margin in the region was {(i * k) % 23} percent, "
            f"and the company opened {i % 7} offices there." for k in range(1, 4)]
        rows.append({
            "id": f"r{i}", "query": f"How did revenue develop in the regions of report {i}?",
            "contexts": passages,
            "answer": f"According to report {i}, revenue grew in every region, by "
                      f"{(i + 1) % 17} to {(i + 3) % 17} percent, mostly from services.",
            "reference": f"Revenue grew in all three regions of report {i}, driven by "
                         "services contracts."})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def score(source: str, base_url: str, model: str, records: Path, out: Path,
          concurrency: int) -> dict[str, Any]:
    """``rageval score`` from the checkout ``source`` on an empty cache: the manifest's judge
    section."""
    argv = [*rageval_command(source), "score", str(records),
            *[a for m in METRICS for a in ("-m", m)], "--judge-model", model,
            "--judge-base-url", base_url, "--judge-concurrency", str(concurrency),
            "--judge-max-retries", "0", "--cache", str(out / "cache.sqlite"),
            "--out", str(out / "run"), "--no-progress"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "OPENAI_API_KEY": "unused"})
    if done.returncode != 0:
        raise SystemExit(f"rageval score failed ({done.returncode}):\n{done.stderr}")
    summary = json.loads((out / "run" / "summary.json").read_text(encoding="utf-8"))
    return summary["manifest"]["judge"]


def loopback(source: str, records: Path, workdir: Path, minimum: int,
             concurrency: int) -> dict[str, Any]:
    """One run against the prefix-cache server: its share and the manifest's."""
    with JudgeServer() as server:
        server.cache_prefixes(128, minimum)
        judge = score(source, server.base_url, "bench-judge", records, workdir, concurrency)
        prompt = sum(p for p, _ in server.prompt_cache_usage)
        cached = sum(c for _, c in server.prompt_cache_usage)
    reported = (judge.get("prompt_cache") or {}).get("share")
    return {"requests": judge["requests"], "prompt_tokens": prompt, "cached_tokens": cached,
            "share": round(cached / prompt, 4) if prompt else 0.0, "manifest_share": reported}


def llama(records: Path, workdir: Path) -> dict[str, Any]:
    """One run against llama-cpp-python's server (the local judge, its prompt cache on)."""
    from rageval.judge.local import DEFAULT_MODEL_NAME, LocalJudge

    with LocalJudge(port=0) as server:
        judge = score(str(ROOT), server.base_url, DEFAULT_MODEL_NAME, records, workdir, 1)
    usage = judge["usage"]
    return {"requests": judge["requests"], "prompt_tokens": usage.get("prompt_tokens"),
            "cached_tokens": usage.get("cached_prompt_tokens"),
            "prompt_cache": judge.get("prompt_cache")}


def base_source(args: argparse.Namespace, tmp: Path) -> str:
    """A checkout of the previous layout: ``--base-source``, else ``--base`` (or the parent of
    the layout's commit) exported from git into a temporary folder."""
    if args.base_source:
        return args.base_source
    rev = args.base or subprocess.run(_LAYOUT_COMMIT, cwd=ROOT, capture_output=True, text=True,
                                      check=True).stdout.strip() + "^"
    path = tmp / "base"
    path.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return str(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--base", help="git revision of the previous layout")
    parser.add_argument("--base-source", help="a checkout of the previous layout")
    parser.add_argument("--llama", action="store_true",
                        help="also run against llama-cpp-python's server (the local judge)")
    parser.add_argument("--llama-records", type=int, default=16)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    figures: dict[str, Any] = {"records": args.records, "metrics": METRICS, "step": 128}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        records = tmp / "records.jsonl"
        write_records(records, args.records)
        base = base_source(args, tmp)
        for layout, source in (("before", base), ("after", str(ROOT))):
            for minimum in (0, 1024):
                work = tmp / f"{layout}-{minimum}"
                work.mkdir()
                figures[f"{layout}/min{minimum}"] = loopback(
                    source, records, work, minimum, args.concurrency)
        if args.llama:
            few = tmp / "few.jsonl"
            write_records(few, args.llama_records)
            (tmp / "llama").mkdir()
            figures["llama-cpp-python"] = llama(few, tmp / "llama")
    print(f"{args.records} records x {len(METRICS)} rubrics, prefix cache in 128-token steps")
    print(f"{'minimum prompt':>16} {'before':>10} {'after':>10}   (share of prompt tokens "
          "reported cached)")
    for minimum in (0, 1024):
        before, after = figures[f"before/min{minimum}"], figures[f"after/min{minimum}"]
        print(f"{minimum:>16} {before['share']:>10.1%} {after['share']:>10.1%}")
    if "llama-cpp-python" in figures:
        print(f"llama-cpp-python: {json.dumps(figures['llama-cpp-python'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
