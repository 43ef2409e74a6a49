"""Corpus BLEU's bootstrap confidence interval: rageval's summary against sacrebleu's own.

    python bench/bench_bleu_ci.py [--records 2000,10000] [--resamples 1000] [--repeats 3]

Anchor: sacrebleu's single-system bootstrap (``sacrebleu --confidence``, the function
``sacrebleu.significance._bootstrap_resample``), which draws every resample at once and sums
each one's segment statistics. rageval computes the same figure from the same statistics
(its summary's ``ci95`` of ``bleu``): a resample's statistics are summed from how often each
record was drawn, reading them in order. Both use 1,000 resamples; their draws differ (each
seeds its own generator), so the two intervals agree closely, not exactly. sacrebleu holds
every resample's statistics at once (resamples x records x 10 float32: 400 MB at 10,000
records), which bounds the sizes this compares at.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import numpy as np
from sacrebleu.metrics import BLEU as SacreBLEU
from sacrebleu.significance import _bootstrap_resample

from rageval.core.metric import Batch
from rageval.core.records import records_from_dicts
from rageval.core.registry import create
from rageval.stats.resampling import bootstrap_ci


def pairs(count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    out = []
    for _ in range(count):
        answer = rng.choices(words, k=rng.randint(8, 40))
        reference = answer[rng.randint(0, 5):] + rng.choices(words, k=rng.randint(0, 10))
        out.append((" ".join(answer), " ".join(reference)))
    return out


def rageval_ci(data: list[tuple[str, str]], resamples: int) -> tuple[float, float]:
    records = records_from_dicts([{"id": str(i), "answer": a, "reference": r}
                                  for i, (a, r) in enumerate(data)])
    metric = create("bleu")
    result = metric.score(Batch(records))
    values = result.values["bleu"]
    indices = np.flatnonzero(~np.isnan(values))
    ci = bootstrap_ci(values[indices], resamples=resamples, seed=0,
                      statistic=lambda idx: metric.corpus_value(result, indices[idx]))
    assert ci is not None
    return ci


def sacrebleu_ci(data: list[tuple[str, str]], resamples: int) -> tuple[float, float]:
    bleu = SacreBLEU()
    stats = bleu._extract_corpus_statistics([a for a, _ in data], [[r for _, r in data]])
    _, scores = _bootstrap_resample(stats, bleu, resamples)
    low, high = np.quantile([s.score for s in scores], [0.025, 0.975])
    return float(low), float(high)


def timed(fn: Callable[[], tuple[float, float]],
          repeats: int) -> tuple[float, tuple[float, float]]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    assert result is not None
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="2000,10000")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"corpus BLEU 95% CI, {args.resamples} resamples, median of {args.repeats} "
          "(each side's time includes extracting the segment statistics)")
    print(f"{'records':>9} {'sacrebleu s':>12} {'rageval s':>10} {'ratio':>7}  "
          f"{'sacrebleu CI':>17}  {'rageval CI':>17}")
    for count in (int(n) for n in args.records.split(",")):
        data = pairs(count, args.seed)
        anchor, anchor_ci = timed(lambda d=data: sacrebleu_ci(d, args.resamples), args.repeats)
        ours, our_ci = timed(lambda d=data: rageval_ci(d, args.resamples), args.repeats)
        print(f"{count:>9,} {anchor:>12.2f} {ours:>10.2f} {anchor / ours:>6.1f}x  "
              f"{anchor_ci[0]:>8.2f}-{anchor_ci[1]:<8.2f}  {our_ci[0]:>8.2f}-{our_ci[1]:<8.2f}")


if __name__ == "__main__":
    main()
