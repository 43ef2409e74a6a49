"""ROUGE: rageval against rouge-score on rouge1 + rouge2 + rougeL, with and without stemming.

    python bench/bench_rouge.py [--pairs 5000] [--repeats 3] [--seed 0]

Anchor: ``rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"],
use_stemmer=...).score(reference, answer)`` for every pair (one tokenisation per pair, shared by
the three types). rageval scores the same pairs as one batch with its three metrics (the batch's
tokens are shared by the three). Every pair's precision, recall and F-measure of every type must
be identical (``==``); the benchmark says whether they are. Times are medians over
``--repeats``; rageval's stem cache is emptied before each of its runs.

The pairs are answer-like: 40-80 words drawn (Zipf-weighted, seeded) from a vocabulary of
everyday and domain words with inflected forms, capitalised sentences, punctuation and numbers;
each reference rewrites its answer (words dropped, replaced, inserted, clauses reordered).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from rouge_score import rouge_scorer

import rageval.generation.rouge as rouge
from rageval.core.metric import Batch, Metric
from rageval.core.records import Record
from rageval.core.registry import create
from rageval.generation.rouge.tokenization import _stem_cache

TYPES = ("rouge1", "rouge2", "rougeL")

# Everyday and domain words, with inflected forms (stemming matters).
_VOCABULARY = """
the of and to in a is that for it as was with be by on not he this are or his from at which but
have an they you were her she there been one all we their has would when if so no will more
about can its only other new some what time these two may first then do any like my now over
such our man me even most made after also did many before must through back years where much
your way well down should because each just those people how too little state good very make
world still own see men work long here get both between life being under never day same another
know while last might us great old year off come since against go came right used take three
company companies revenue revenues growth grew growing market markets customer customers product
products service services sales sale quarter quarterly annual annually report reported reporting
increase increased increasing decrease decreased income operating operations cost costs price
prices pricing margin margins profit profits segment segments cloud software data model models
training trained system systems user users network networks security research results result
approach approaches method methods analysis analyzed analyzing study studies policy policies
government public private health patients patient treatment treatments clinical trial trials
risk risks factor factors effect effects significant significantly higher lower rate rates level
levels energy power water climate change changes changed changing environment environmental
emissions carbon production produced producing supply demand chain global local regional
national international investment investments investor investors fund funds financial bank banks
loan loans interest credit debt capital assets asset value values share shares stock employees
employee team teams management manager managers strategy strategic plan plans planned planning
development developed developing technology technologies platform platforms device devices
mobile online digital advertising subscription subscriptions license licensing contract
contracts agreement agreements partner partners partnership acquisition acquisitions acquired
legal regulatory regulation regulations compliance approval approved court law laws rule rules
process processes processing quality standard standards performance performed performing
efficient efficiency improve improved improving improvement improvements reduce reduced reducing
reduction support supported supporting provide provided providing provides include included
including includes require required requiring requirement requirements based main primary key
major largest large small smaller larger significant additional several various different
specific general total overall average approximately nearly percent billion million thousand
according however therefore although because while during within across among including
"""
_WORDS = _VOCABULARY.split()
_CONNECTORS = [", ", ", ", "; ", " - ", ", and "]
_ENDS = [". ", ". ", ". ", "! ", "? "]


def _zipf_weights(size: int) -> list[float]:
    return [1.0 / (rank + 1) ** 0.9 for rank in range(size)]


def _words(rng: random.Random, weights: list[float], count: int) -> list[str]:
    words = rng.choices(_WORDS, weights=weights, k=count)
    for i in range(count):
        if rng.random() < 0.03:
            words[i] = str(rng.choice([rng.randint(1, 99), rng.randint(1990, 2030)]))
        elif rng.random() < 0.02:
            words[i] = f"{rng.randint(1, 99)}.{rng.randint(0, 9)}%"
    return words


def _text(rng: random.Random, words: list[str]) -> str:
    """Words into sentences: capitals, commas, full stops (and sometimes a newline)."""
    out: list[str] = []
    start = True
    for i, word in enumerate(words):
        out.append(word.capitalize() if start else word)
        start = False
        if i == len(words) - 1:
            out.append(".")
        elif rng.random() < 0.08:
            out.append(rng.choice(_ENDS) if rng.random() < 0.6 else rng.choice(_CONNECTORS))
            start = out[-1] in _ENDS
            if start and rng.random() < 0.2:
                out[-1] = out[-1].rstrip() + "\n"
        else:
            out.append(" ")
    return "".join(out).strip()


def _rewrite(rng: random.Random, weights: list[float], words: list[str]) -> list[str]:
    """A reference for an answer: drop, replace and insert words, swap two halves sometimes."""
    out: list[str] = []
    for word in words:
        roll = rng.random()
        if roll < 0.15:
            continue
        if roll < 0.35:
            out.extend(_words(rng, weights, 1))
        else:
            out.append(word)
        if rng.random() < 0.1:
            out.extend(_words(rng, weights, rng.randint(1, 3)))
    if rng.random() < 0.3:
        cut = len(out) // 2
        out = out[cut:] + out[:cut]
    target = rng.randint(40, 80)
    if len(out) < target:
        out.extend(_words(rng, weights, target - len(out)))
    return out[:80]


def generate_pairs(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """``count`` seeded (reference, answer) pairs of 40-80 words each."""
    rng = random.Random(seed)
    weights = _zipf_weights(len(_WORDS))
    pairs = []
    for _ in range(count):
        answer = _words(rng, weights, rng.randint(40, 80))
        reference = _rewrite(rng, weights, answer)
        pairs.append((_text(rng, reference), _text(rng, answer)))
    return pairs


Scores = list[tuple[float, ...]]  # per pair: (p, r, f) of every type, in TYPES order


def run_rouge_score(pairs: list[tuple[str, str]], stem: bool) -> Scores:
    scorer = rouge_scorer.RougeScorer(list(TYPES), use_stemmer=stem)
    out = []
    for reference, answer in pairs:
        scores = scorer.score(reference, answer)
        out.append(tuple(v for t in TYPES for v in scores[t]))
    return out


def run_rageval(pairs: list[tuple[str, str]], stem: bool) -> Scores:
    records = [Record(id=str(i), answer=a, references=(r,)) for i, (r, a) in enumerate(pairs)]
    batch = Batch(records)
    flag = "true" if stem else "false"
    metrics: list[Metric] = [create(f"{t}(stem={flag})") for t in TYPES]
    columns = []
    for metric in metrics:
        values = metric.score(batch).values
        name = str(metric)
        columns += [values[f"{name}.{part}"] for part in ("precision", "recall", "fmeasure")]
    return [tuple(float(v) for v in row) for row in np.column_stack(columns)]


def timed(
    fn: Callable[[], Scores], repeats: int, before: Callable[[], None]
) -> tuple[float, Scores]:
    times, result = [], []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()

    pairs = generate_pairs(args.pairs, args.seed)
    tokens = [len(rouge.tokenize(a)) for _, a in pairs]
    print(f"{len(pairs)} pairs (answers of 40-80 words: {min(tokens)}-{max(tokens)} tokens, "
          f"mean {statistics.mean(tokens):.0f}), {' + '.join(TYPES)}, median of {args.repeats}")
    header = f"{'stem':<6}{'rouge-score':>16}{'rageval':>16}{'ratio':>9}  identical"
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    all_identical = True
    for stem in (False, True):
        base_s, expected = timed(lambda s=stem: run_rouge_score(pairs, s), args.repeats,
                                 lambda: None)
        ours_s, got = timed(lambda s=stem: run_rageval(pairs, s), args.repeats,
                            _stem_cache.clear)
        identical = got == expected
        all_identical &= identical
        base_rate, ours_rate = len(pairs) / base_s, len(pairs) / ours_s
        print(f"{str(stem).lower():<6}{base_rate:>10,.0f} pairs/s{ours_rate:>8,.0f} pairs/s"
              f"{ours_rate / base_rate:>8.1f}x  {'yes' if identical else 'NO'}")
        rows.append({"stem": stem, "rouge_score_pairs_per_s": base_rate,
                     "rageval_pairs_per_s": ours_rate, "ratio": ours_rate / base_rate,
                     "identical": identical})
    print("values identical to rouge-score (precision, recall, fmeasure of every pair): "
          + ("yes" if all_identical else "NO"))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"pairs": len(pairs), "repeats": args.repeats, "rows": rows}, handle,
                      indent=2)
    if not all_identical:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
