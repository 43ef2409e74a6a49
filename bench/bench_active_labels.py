"""Active labelling against uniform labelling at the same number of labels: how wide the
calibrated 95% interval of the mean human label is, and how often it holds the true mean.
A seeded simulation.

    python bench/bench_active_labels.py [--trials 1000] [--seed 0] [--pool 5000]
                                        [--labels 20,40,...,200] [--mix 0.3] [--mixes 0.1,0.5]

The population (200,000 records) has a human label on a 1-5 rubric scale and a judge asked
five times per record (``--judge-samples 5``): its score is the samples' mean, its uncertainty
their standard deviation. Some records (``--hard``, 15%) are hard: the judge's samples centre
on a wrong value (off by a record's own amount, normal with sd 1 point, kept inside the scale)
and disagree (sd 1.5). The others are easy: the samples centre on the label with sd 0.25, so
they nearly always agree. ``--confidently-wrong`` (0% by default) makes that share of records
off by one point while the samples agree: there the uncertainty misleads. A trial draws a pool
of ``--pool`` records (5,000) from the population and, for each number of labels ``n``:

- uniform (the anchor): ``n`` records of the pool chosen at random and labelled; PPI over the
  pool (``ppi_mean`` with ``tuned=False``, rageval's headline calibration);
- active (rageval): ``selection_probabilities(uncertainty, n)`` over the same pool, each record
  labelled with its probability, the paper's estimator (``active_mean``), and its power-tuned
  variant beside it.

The true mean is the population's mean label. Every active estimate is checked against the
paper's formula written out in numpy.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass

import numpy as np

from rageval.stats.active import DEFAULT_MIX, active_mean, selection_probabilities
from rageval.stats.calibration import ppi_mean

POPULATION = 200_000
SAMPLES = 5
LABELS = tuple(range(20, 201, 20))
HARD = 0.15  # the judge is off by a record's own amount, and its samples disagree
WRONG = 0.0  # the judge is off by one point, and its samples agree
OFFSET = 1.0  # sd of a hard record's own error, in points
NOISE = 1.5  # sd of a hard record's samples around it


@dataclass
class Row:
    labels: int
    width_uniform: float
    width_active: float
    width_active_tuned: float
    coverage_uniform: float
    coverage_active: float
    coverage_active_tuned: float
    mean_labels_active: float
    trials_active_under_two_labels: int

    @property
    def ratio(self) -> float:
        return self.width_active / self.width_uniform


def population(rng: np.random.Generator, hard: float = HARD, confidently_wrong: float = WRONG,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Human labels, judge scores and judge uncertainties of the population."""
    labels = np.clip(np.round(3 + 1.2 * rng.normal(size=POPULATION)), 1, 5)
    kind = rng.choice(3, size=POPULATION, p=[1 - hard - confidently_wrong, hard,
                                             confidently_wrong])
    # an unsure judge's samples centre inside the scale (else they pile up on its end and
    # agree); a sure one errs by a point towards the middle of the scale
    centre = np.where(kind == 1, np.clip(labels + rng.normal(0, OFFSET, POPULATION), 1.5, 4.5),
                      labels)
    centre = np.where(kind == 2, labels + np.where(labels >= 3, -1.0, 1.0), centre)
    spread = np.where(kind == 1, NOISE, 0.25)[:, None]
    samples = np.clip(np.round(centre[:, None] + spread * rng.normal(size=(POPULATION, SAMPLES))),
                      1, 5)
    return labels, samples.mean(axis=1), samples.std(axis=1, ddof=1)


def _trial(y: np.ndarray, f: np.ndarray, u: np.ndarray, n: int, mix: float,
           rng: np.random.Generator) -> tuple[tuple[float, float], ...] | None:
    """One pool, ``n`` labels each way: the intervals (uniform, active, active tuned) and the
    number of active labels, or None where active drew fewer than two."""
    chosen = np.zeros(len(y), dtype=bool)
    chosen[rng.choice(len(y), size=n, replace=False)] = True
    uniform = ppi_mean(y[chosen], f[chosen], f[~chosen], tuned=False)
    pi = selection_probabilities(u, n, mix=mix)
    drawn = rng.random(len(y)) < pi
    if drawn.sum() < 2:
        return None
    labels = np.where(drawn, y, np.nan)
    active = active_mean(f, labels, pi)
    by_hand = float(np.mean(f + (y - f) * drawn / pi))  # the paper's formula, written out
    assert abs(active.mean - by_hand) < 1e-9, (active.mean, by_hand)
    tuned = active_mean(f, labels, pi, lam=None)
    return uniform.ci, active.ci, tuned.ci, (float(drawn.sum()), 0.0)


def simulate(n: int, pool: int, trials: int, mix: float, seed: int,
             data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Row:
    labels, judged, uncertainty = data
    truth = float(labels.mean())
    rng = np.random.default_rng(seed)
    widths, covered = np.zeros((trials, 3)), np.zeros((trials, 3), dtype=bool)
    drawn, failed = [], 0
    for t in range(trials):
        picked = rng.integers(0, POPULATION, size=pool)
        out = _trial(labels[picked], judged[picked], uncertainty[picked], n, mix, rng)
        if out is None:  # counted as a miss with the widest interval seen
            failed += 1
            widths[t] = np.nan
            continue
        for k, (low, high) in enumerate(out[:3]):
            widths[t, k] = high - low
            covered[t, k] = low <= truth <= high
        drawn.append(out[3][0])
    mean_width = np.nanmean(widths, axis=0)
    coverage = covered.mean(axis=0)
    return Row(n, *map(float, mean_width), *map(float, coverage), float(np.mean(drawn)),
               failed)


def table(rows: list[Row]) -> str:
    lines = ["| labels | width uniform PPI (anchor) | width active (rageval) | active / uniform "
             "| coverage uniform | coverage active | labels drawn, active (mean) | width active "
             "power-tuned | coverage active power-tuned |",
             "|" + " --- |" * 9]
    for r in rows:
        lines.append(f"| {r.labels} | {r.width_uniform:.3f} | {r.width_active:.3f} | "
                     f"{r.ratio:.2f}x | {r.coverage_uniform:.1%} | {r.coverage_active:.1%} | "
                     f"{r.mean_labels_active:.1f} | {r.width_active_tuned:.3f} | "
                     f"{r.coverage_active_tuned:.1%} |")
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pool", type=int, default=5000, help="records in each trial's pool")
    parser.add_argument("--labels", type=_ints, default=list(LABELS),
                        help="numbers of labels, comma-separated")
    parser.add_argument("--mix", type=float, default=DEFAULT_MIX, help="the uniform rule's share")
    parser.add_argument("--mixes", type=_floats, default=[],
                        help="also sweep these mixing weights (width ratio and coverage)")
    parser.add_argument("--hard", type=float, default=HARD,
                        help="share of records the judge gets wrong and is unsure of")
    parser.add_argument("--confidently-wrong", type=float, default=WRONG,
                        help="share of records the judge gets wrong and is sure of")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    start = time.perf_counter()
    data = population(np.random.default_rng(args.seed), args.hard, args.confidently_wrong)
    print(f"{args.trials} trials per row, pool of {args.pool} records, mix {args.mix}, "
          f"hard {args.hard:.0%}, confidently wrong {args.confidently_wrong:.0%}, "
          f"seed {args.seed}; 95% intervals; judge-label correlation "
          f"{np.corrcoef(data[0], data[1])[0, 1]:.2f}\n")
    rows = [simulate(n, args.pool, args.trials, args.mix, args.seed + 1 + i, data)
            for i, n in enumerate(args.labels)]
    print(table(rows))
    worst = max(r.ratio for r in rows)
    lowest = min(r.coverage_active for r in rows)
    pooled = float(np.mean([r.coverage_active for r in rows]))
    print(f"\nactive / uniform width at most {worst:.2f}x; active coverage at least {lowest:.1%} "
          f"per row, {pooled:.1%} over all {args.trials * len(rows)} trials (goal: at most 0.80x, "
          f"at least 94%; a row's coverage has a Monte-Carlo error of about "
          f"{np.sqrt(0.95 * 0.05 / args.trials):.1%})")
    for mix in args.mixes:
        swept = [simulate(n, args.pool, args.trials, mix, args.seed + 1 + i, data)
                 for i, n in enumerate(args.labels)]
        print(f"mix {mix:.2f}: width ratio " + " ".join(f"{r.ratio:.2f}" for r in swept)
              + f"; coverage at least {min(r.coverage_active for r in swept):.1%}")
    print(f"\n{time.perf_counter() - start:.1f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([asdict(r) | {"ratio": r.ratio} for r in rows], handle, indent=2)


if __name__ == "__main__":
    main()
