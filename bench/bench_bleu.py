"""Benchmark: rageval's ``bleu`` against sacrebleu on answer-like texts.

Generates seeded answer/reference pairs (40-80 words each by default, the reference a noisy
paraphrase of the answer) and times, in one process, what a user needs from each tool: every
pair's sentence BLEU and the corpus BLEU.

* sacrebleu: ``BLEU(effective_order=True).sentence_score`` per pair, then
  ``sacrebleu.corpus_bleu`` over all pairs (which tokenises everything again).
* rageval: ``rageval.evaluate(records, ["bleu"])``, once with ``bootstrap=1`` (scoring and the
  summary only) and once with the default 1000-resample bootstrap CI of corpus BLEU.

Each side builds fresh sacrebleu objects on every repeat, so no tokeniser cache survives from one
repeat to the next. The median over ``--repeats`` is reported, and every per-pair value and the
corpus value are checked for exact equality before the table is printed.

    python bench/bench_bleu.py [--pairs 5000] [--repeats 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sacrebleu
from sacrebleu.metrics import BLEU

import rageval
import rageval.generation.bleu  # registers "bleu"
from rageval.api import evaluate
from rageval.core.records import Record

_TEXT = (
    "the company reported revenue growth in the third quarter driven by strong demand for "
    "cloud services and subscription products while operating costs rose because of new "
    "hiring and higher energy prices analysts expect margins to improve next year as the "
    "firm expands into european and asian markets customers can reset a password from the "
    "account settings page or contact support by email the policy covers accidental damage "
    "but not theft unless a police report is filed within thirty days the model retrieves "
    "relevant passages from the knowledge base and writes an answer that cites each source "
    "according to the report about 40 % of users prefer the mobile app over the website"
)
VOCABULARY = _TEXT.split()
PUNCTUATION = [",", ".", ";", ":", "(", ")", "'s", "?"]

SACREBLEU = "sacrebleu: sentence_score x N + corpus_bleu"
SACRE_SENT = "  of which sentence_score x N"
SACRE_CORPUS = "  of which corpus_bleu"
RAGEVAL_ONE = "rageval evaluate(['bleu'], bootstrap=1)"
RAGEVAL_CI = "rageval evaluate(['bleu']), 1000-resample CI"


# ---- data -------------------------------------------------------------------------------


def _answer(rng: random.Random, min_words: int, max_words: int) -> list[str]:
    words: list[str] = []
    target = rng.randint(min_words, max_words)
    while len(words) < target:
        start = rng.randrange(len(VOCABULARY) - 12)
        words += VOCABULARY[start : start + rng.randint(4, 12)]  # fluent-looking runs
    return words[:target]


def _paraphrase(rng: random.Random, words: list[str]) -> list[str]:
    out = []
    for word in words:
        roll = rng.random()
        if roll < 0.08:
            continue  # dropped
        out.append(rng.choice(VOCABULARY) if roll < 0.2 else word)
        if rng.random() < 0.03:
            out.append(rng.choice(VOCABULARY))  # inserted
    for _ in range(len(out) // 15):  # local reorderings
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return out


def _render(rng: random.Random, words: list[str]) -> str:
    text = " ".join(w + (rng.choice(PUNCTUATION) if rng.random() < 0.06 else "") for w in words)
    return text[:1].upper() + text[1:] + "."


def generate(pairs: int, seed: int, min_words: int, max_words: int) -> list[tuple[str, str]]:
    """Seeded (answer, reference) pairs of ``min_words``-``max_words`` words each."""
    rng = random.Random(seed)
    out = []
    for _ in range(pairs):
        words = _answer(rng, min_words, max_words)
        out.append((_render(rng, words), _render(rng, _paraphrase(rng, words))))
    return out


# ---- the two sides ----------------------------------------------------------------------


def sacrebleu_sentences(pairs: list[tuple[str, str]]) -> list[float]:
    bleu = BLEU(effective_order=True)
    return [bleu.sentence_score(answer, [reference]).score for answer, reference in pairs]


def sacrebleu_corpus(pairs: list[tuple[str, str]]) -> float:
    return sacrebleu.corpus_bleu([a for a, _ in pairs], [[r for _, r in pairs]]).score


def run_rageval(records: list[Record], bootstrap: int) -> tuple[list[float], float]:
    results = evaluate(records, ["bleu"], bootstrap=bootstrap)
    sentences = [r.scores["bleu"] for r in results.records]
    corpus = results.summary["bleu"].value
    if corpus is None or any(s is None for s in sentences):
        raise RuntimeError("rageval left a pair unscored")
    return [float(s) for s in sentences if s is not None], corpus


def _timed(work: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = work()
    return time.perf_counter() - start, out


def one_repeat(
    pairs: list[tuple[str, str]], records: list[Record]
) -> tuple[dict[str, float], dict[str, tuple[list[float], float]]]:
    """Time every side once; return the times and each side's (sentence values, corpus)."""
    t_sent, sentences = _timed(lambda: sacrebleu_sentences(pairs))
    t_corpus, corpus = _timed(lambda: sacrebleu_corpus(pairs))
    t_one, rageval_one = _timed(lambda: run_rageval(records, 1))
    t_ci, rageval_ci = _timed(lambda: run_rageval(records, 1000))
    times = {SACREBLEU: t_sent + t_corpus, SACRE_SENT: t_sent, SACRE_CORPUS: t_corpus,
             RAGEVAL_ONE: t_one, RAGEVAL_CI: t_ci}
    outputs = {SACREBLEU: (sentences, corpus), RAGEVAL_ONE: rageval_one, RAGEVAL_CI: rageval_ci}
    return times, outputs


# ---- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-words", type=int, default=40)
    parser.add_argument("--max-words", type=int, default=80)
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)

    pairs = generate(args.pairs, args.seed, args.min_words, args.max_words)
    records = [Record(id=str(i), answer=a, references=(r,)) for i, (a, r) in enumerate(pairs)]
    one_repeat(pairs[:20], records[:20])  # warm-up: imports and lazy loading on both sides

    times: dict[str, list[float]] = {}
    outputs: dict[str, tuple[list[float], float]] = {}
    for _ in range(args.repeats):
        repeat_times, outputs = one_repeat(pairs, records)
        for name, seconds in repeat_times.items():
            times.setdefault(name, []).append(seconds)

    anchor_sentences, anchor_corpus = outputs[SACREBLEU]
    agree = all(out == (anchor_sentences, anchor_corpus) for out in outputs.values())
    medians = {name: statistics.median(t) for name, t in times.items()}
    _print_table(args, medians, anchor_sentences, anchor_corpus, agree)
    if args.json is not None:
        args.json.write_text(json.dumps({
            "pairs": args.pairs, "repeats": args.repeats, "seed": args.seed,
            "times_s": {k.strip(): v for k, v in times.items()},
            "median_s": {k.strip(): v for k, v in medians.items()}, "agree": agree,
            "corpus_bleu": anchor_corpus,
            "mean_sentence_bleu": statistics.fmean(anchor_sentences),
            "versions": _versions(),
        }, indent=2) + "\n")
    return 0 if agree else 1


def _print_table(
    args: argparse.Namespace,
    medians: dict[str, float],
    sentences: list[float],
    corpus: float,
    agree: bool,
) -> None:
    anchor = medians[SACREBLEU]
    print(f"BLEU on {args.pairs} answer/reference pairs ({args.min_words}-{args.max_words} "
          f"words, seed {args.seed}), median of {args.repeats} repeat(s)")
    print(f"versions: {_versions()}")
    width = max(len(name) for name in medians)
    print(f"{'side':<{width}}  {'median s':>9}  {'us/pair':>8}  {'vs sacrebleu':>12}")
    for name, seconds in medians.items():
        per_pair = 1e6 * seconds / args.pairs
        print(f"{name:<{width}}  {seconds:>9.3f}  {per_pair:>8.1f}  {seconds / anchor:>11.2f}x")
    print(f"corpus BLEU {corpus:.2f}; mean of sentence BLEU {statistics.fmean(sentences):.2f}")
    print("values agree (every sentence BLEU and the corpus BLEU, exact float equality)"
          if agree else "VALUES DIFFER")


def _versions() -> str:
    return (f"python {platform.python_version()}, sacrebleu {sacrebleu.__version__}, "
            f"rageval {rageval.__version__}")


if __name__ == "__main__":
    sys.exit(main())
