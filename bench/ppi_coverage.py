"""How often the calibrated judge mean's 95% interval holds the true human mean, and how wide
it is beside the interval of the human labels alone: a seeded simulation.

    python bench/ppi_coverage.py [--trials 1000] [--seed 0] [--json FILE]

Each setting builds a population of 200,000 records: a human label on a 1-5 rubric scale (or a
0/1 verdict) from a normal latent variable, and a judge score from the same latent variable
mixed with noise until it correlates with the label as asked, then shifted up by 0.4 (0.1 for
verdicts), so that the judge alone is biased. The true mean is the population's mean label.
A trial draws ``n`` labelled and ``N`` unlabelled records from the population (with
replacement, so the draws are independent and the population mean is the mean they estimate)
and computes the intervals rageval reports: PPI (the headline), PPI++, and the labels alone,
with the judge's own mean over every drawn record for contrast. The anchor is the labels
alone: what a team gets from the same labels without a judge.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

import numpy as np

from rageval.stats.calibration import classical_mean, ppi_mean

POPULATION = 200_000


@dataclass(frozen=True)
class Setting:
    scale: str  # "1-5" or "0/1"
    labelled: int
    unlabelled: int
    mixing: float  # the latent variable's share of the judge's


@dataclass
class Row:
    scale: str
    labelled: int
    unlabelled: int
    correlation: float
    judge_bias: float
    coverage_ppi_plus_plus: float
    coverage_ppi: float
    coverage_labels_alone: float
    coverage_judge_alone: float
    width_ppi_plus_plus: float
    width_ppi: float
    width_labels_alone: float
    trials_ppi_plus_plus_wider_than_labels_alone: int
    trials_ppi_plus_plus_wider_than_ppi: int
    most_ppi_plus_plus_wider_than_ppi: float  # the largest excess of its width, relative


def population(setting: Setting, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    latent = rng.normal(size=POPULATION)
    noise = rng.normal(size=POPULATION)
    judged = setting.mixing * latent + np.sqrt(1 - setting.mixing ** 2) * noise
    if setting.scale == "0/1":
        return (latent > 0.3).astype(float), (judged + 0.25 > 0.3).astype(float)
    labels = np.clip(np.round(3 + 1.2 * latent), 1, 5)
    return labels, np.clip(np.round(3.4 + 1.2 * judged), 1, 5)


def simulate(setting: Setting, trials: int, seed: int) -> Row:
    rng = np.random.default_rng(seed)
    labels, judged = population(setting, rng)
    truth = float(labels.mean())
    covered = {"pp": 0, "ppi": 0, "alone": 0, "judge": 0}
    widths: dict[str, list[float]] = {"pp": [], "ppi": [], "alone": []}
    wider_than_alone = wider_than_ppi = 0
    most_wider = 0.0
    for _ in range(trials):
        picked = rng.integers(0, POPULATION, size=setting.labelled + setting.unlabelled)
        lab, rest = picked[:setting.labelled], picked[setting.labelled:]
        tuned = ppi_mean(labels[lab], judged[lab], judged[rest])
        plain = ppi_mean(labels[lab], judged[lab], judged[rest], tuned=False)
        _, alone = classical_mean(labels[lab])
        _, judge_alone = classical_mean(judged[picked])
        for key, (low, high) in (("pp", tuned.ci), ("ppi", plain.ci), ("alone", alone)):
            covered[key] += low <= truth <= high
            widths[key].append(high - low)
        covered["judge"] += judge_alone[0] <= truth <= judge_alone[1]
        wider_than_alone += tuned.width > widths["alone"][-1] * (1 + 1e-12)
        if tuned.width > plain.width * (1 + 1e-12):
            wider_than_ppi += 1
            most_wider = max(most_wider, tuned.width / plain.width - 1)
    return Row(setting.scale, setting.labelled, setting.unlabelled,
               round(float(np.corrcoef(labels, judged)[0, 1]), 3),
               round(float(judged.mean()) - truth, 3),
               covered["pp"] / trials, covered["ppi"] / trials, covered["alone"] / trials,
               covered["judge"] / trials,
               float(np.mean(widths["pp"])), float(np.mean(widths["ppi"])),
               float(np.mean(widths["alone"])), wider_than_alone, wider_than_ppi, most_wider)


SETTINGS = [Setting(scale, n, big_n, mixing)
            for scale in ("1-5", "0/1")
            for mixing in (0.55, 0.85, 0.95)
            for n, big_n in ((20, 500), (50, 2000), (100, 2000), (200, 2000))]


def table(rows: list[Row]) -> str:
    head = ("| scale | labelled | unlabelled | judge-label correlation | judge bias | coverage "
            "PPI | coverage PPI++ | coverage labels alone | coverage judge alone | width PPI | "
            "width PPI++ | width labels alone | PPI++ wider than PPI (most) | PPI++ wider than "
            "labels alone |")
    lines = [head, "|" + " --- |" * 14]
    for r in rows:
        lines.append(f"| {r.scale} | {r.labelled} | {r.unlabelled} | {r.correlation:.2f} | "
                     f"{r.judge_bias:+.2f} | {r.coverage_ppi:.1%} | "
                     f"{r.coverage_ppi_plus_plus:.1%} | {r.coverage_labels_alone:.1%} | "
                     f"{r.coverage_judge_alone:.1%} | "
                     f"{r.width_ppi:.3f} | {r.width_ppi_plus_plus:.3f} | "
                     f"{r.width_labels_alone:.3f} | {r.trials_ppi_plus_plus_wider_than_ppi} "
                     f"({r.most_ppi_plus_plus_wider_than_ppi:.0%}) | "
                     f"{r.trials_ppi_plus_plus_wider_than_labels_alone} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    rows = [simulate(s, args.trials, args.seed + i) for i, s in enumerate(SETTINGS)]
    print(f"{args.trials} trials per setting, seed {args.seed}; 95% intervals\n")
    print(table(rows))
    wider = sum(r.trials_ppi_plus_plus_wider_than_ppi for r in rows)
    alone = sum(r.trials_ppi_plus_plus_wider_than_labels_alone for r in rows)
    print(f"\nPPI++ wider than PPI in {wider} of {args.trials * len(rows)} trials, wider than "
          f"the labels alone in {alone}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([asdict(r) for r in rows], handle, indent=2)


if __name__ == "__main__":
    main()
