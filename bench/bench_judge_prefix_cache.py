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
record; or ``--base-source DIR``, a checkout) and this checkout's, side by side. The same for
``--records``/4 conversations of four turns judged for ``judge:answer_relevance`` and
``judge:faithfulness`` (each turn shown with the turns before it).

``--llama`` adds runs of the same command, both layouts, against llama-cpp-python's server, the
local judge (SmolLM2-135M-Instruct, as ``rageval local-judge`` starts it, logging verbosely),
on ``--llama-records`` records: what its replies report of its prompt cache, and the share of
prompt tokens its log says it reused from the previous prompt (needs the ``local`` extra).

    python bench/bench_judge_prefix_cache.py [--records 200] [--base REV | --base-source DIR]
                                             [--llama] [--llama-records 16] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


def write_conversations(path: Path, n: int) -> None:
    """``n`` conversations of four turns each, the turns shaped as :func:`write_records`'s."""
    rows = []
    for c in range(n):
        turns = [{"query": f"Turn {t}: what does report {c} say about region {t + 1}?",
                  "contexts": [f"Annual report {c}, region {t + 1}: revenue grew by "
                               f"{(c + t) % 17} percent, driven by services contracts; "
                               f"operating margin was {(c * t) % 23} percent."],
                  "answer": f"Revenue in region {t + 1} grew {(c + t) % 17} percent."}
                 for t in range(4)]
        rows.append({"id": f"c{c}", "turns": turns})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


#: Each set: how its records are written and the two rubrics judged on them.
SETS = {"records": (write_records, METRICS),
        "conversations": (write_conversations, ["judge:answer_relevance",
                                                "judge:faithfulness"])}


def score(source: str, base_url: str, model: str, records: Path, out: Path,
          concurrency: int, metrics: list[str] = METRICS) -> dict[str, Any]:
    """``rageval score`` from the checkout ``source`` on an empty cache: the manifest's judge
    section."""
    argv = [*rageval_command(source), "score", str(records),
            *[a for m in metrics for a in ("-m", m)], "--judge-model", model,
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
             concurrency: int, metrics: list[str]) -> dict[str, Any]:
    """One run against the prefix-cache server: its share and the manifest's."""
    with JudgeServer() as server:
        server.cache_prefixes(128, minimum)
        judge = score(source, server.base_url, "bench-judge", records, workdir, concurrency,
                      metrics)
        prompt = sum(p for p, _ in server.prompt_cache_usage)
        cached = sum(c for _, c in server.prompt_cache_usage)
    reported = (judge.get("prompt_cache") or {}).get("share")
    return {"requests": judge["requests"], "prompt_tokens": prompt, "cached_tokens": cached,
            "share": round(cached / prompt, 4) if prompt else 0.0, "manifest_share": reported}


_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt")


def llama(source: str, records: Path, workdir: Path) -> dict[str, Any]:
    """One run against llama-cpp-python's server, the local judge: what it reports of its
    prompt cache (its usage has no such field), and what its log says it reused (the server
    keeps the previous prompt's state and evaluates only what follows the prefix it shares,
    ``Llama.generate: N prefix-match hit, remaining M prompt tokens to eval``)."""
    from rageval.judge.local import DEFAULT_MODEL_NAME, LocalJudge

    class Verbose(LocalJudge):  # the same server, logging each prompt's prefix match
        def command(self) -> list[str]:
            return [*super().command()[:-1], "True"]

    log = workdir / "server.log"
    with Verbose(port=0, log=log) as server:
        judge = score(source, server.base_url, DEFAULT_MODEL_NAME, records, workdir, 1)
    usage = judge["usage"]
    hits = [(int(a), int(b)) for a, b in _PREFIX_HIT.findall(log.read_text(errors="replace"))]
    reused, evaluated = sum(a for a, _ in hits), sum(b for _, b in hits)
    return {"requests": judge["requests"], "usage_keys": sorted(usage),
            "reported_cached": usage.get("cached_prompt_tokens"),
            "prompt_tokens": usage.get("prompt_tokens"), "log_reused_tokens": reused,
            "log_share": round(reused / (reused + evaluated), 4) if hits else 0.0}


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
    figures: dict[str, Any] = {"records": args.records, "step": 128}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        base = base_source(args, tmp)
        for kind, (write, metrics) in SETS.items():
            records = tmp / f"{kind}.jsonl"
            write(records, args.records if kind == "records" else args.records // 4)
            for layout, source in (("before", base), ("after", str(ROOT))):
                for minimum in (0, 1024):
                    work = tmp / f"{kind}-{layout}-{minimum}"
                    work.mkdir()
                    figures[f"{kind}/{layout}/min{minimum}"] = loopback(
                        source, records, work, minimum, args.concurrency, metrics)
        if args.llama:
            few = tmp / "few.jsonl"
            write_records(few, args.llama_records)
            for layout, source in (("before", base), ("after", str(ROOT))):
                (tmp / f"llama-{layout}").mkdir()
                figures[f"llama-cpp-python/{layout}"] = llama(source, few, tmp / f"llama-{layout}")
    print(f"share of prompt tokens reported cached, prefix cache in 128-token steps "
          f"({args.records} records; {args.records // 4} conversations of 4 turns)")
    print(f"{'set':>14} {'rubrics':>40} {'minimum prompt':>15} {'before':>8} {'after':>8}")
    for kind, (_, metrics) in SETS.items():
        for minimum in (0, 1024):
            before = figures[f"{kind}/before/min{minimum}"]["share"]
            after = figures[f"{kind}/after/min{minimum}"]["share"]
            print(f"{kind:>14} {' + '.join(metrics):>40} {minimum:>15} {before:>8.1%} "
                  f"{after:>8.1%}")
    for layout in ("before", "after"):
        if f"llama-cpp-python/{layout}" in figures:
            print(f"llama-cpp-python, {layout}: "
                  f"{json.dumps(figures[f'llama-cpp-python/{layout}'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
