"""The summary's two bootstraps side by side: the exact percentile bootstrap (every value kept,
``n`` indices drawn per resample) and the Poisson bootstrap of running sums (``--ci poisson``,
what a run past 100,000 records uses), on generated runs.

    python bench/bench_bootstrap.py [--runs 100] [--sizes 50,500,5000] [--seeds 5]
        [--resamples 1000] [--bleu-runs 100]

Each generated run is summarised by both methods through rageval's own summary code
(``SummaryParts``), each with ``--seeds`` seeds. The interval ends of one method differ from
seed to seed by their Monte-Carlo error; the table compares the two methods' ends averaged over
the seeds against that error. Per size: the mean width of the exact interval, the mean ratio of
the Poisson interval's width to it, the mean difference of the lower and upper ends (Poisson
minus exact, as a share of the exact width), the Monte-Carlo standard error of that difference
(same unit), and the share of runs whose difference is within two of its standard errors (about
95% expected when the methods agree; the errors are estimated from the seeds, so a few points
less with few seeds). The runs cycle through four shapes of per-record values: hits (0/1,
p = 0.3), uniform scores, a 1-5 judge scale and log-normal ranks; corpus BLEU is compared
apart, on generated texts.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

import numpy as np

from rageval.core.metric import Batch, Metric, MetricResult
from rageval.core.records import Record, records_from_dicts
from rageval.core.registry import create
from rageval.summary import SummaryParts

SHAPES: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "hits": lambda rng, n: (rng.random(n) < 0.3).astype(np.float64),
    "uniform": lambda rng, n: rng.random(n),
    "judge 1-5": lambda rng, n: rng.choice([1.0, 2, 3, 4, 5], n, p=[.1, .15, .2, .3, .25]),
    "log-normal": lambda rng, n: np.floor(rng.lognormal(1.5, 1.0, n)) + 1,
}


def interval(metric: Metric, part: MetricResult, ids: list[str], seed: int, resamples: int,
             poisson: bool) -> tuple[float, float]:
    """The headline's 95% interval of one run, summarised by one method."""
    parts = SummaryParts([metric], seed=seed, bootstrap=resamples,
                         exact_records=0 if poisson else None)
    parts.add_records([Record(i, query="q") for i in ids])
    parts.add_part(metric, metric.summary_part(part), [None] * len(ids))
    item = parts.summarise([metric], seed, resamples)[metric.output_names()[0]]
    assert item.ci95 is not None and item.ci_method == ("poisson" if poisson else "records")
    return item.ci95


def compare_run(metric: Metric, part: MetricResult, n: int, seeds: int,
                resamples: int) -> dict[str, float]:
    """Both methods' ends over ``seeds`` seeds: widths, differences and their errors."""
    ids = [f"r{i}" for i in range(n)]
    ends = {method: np.array([interval(metric, part, ids, s, resamples, method == "poisson")
                              for s in range(seeds)]) for method in ("exact", "poisson")}
    exact, poisson = ends["exact"], ends["poisson"]
    width = float((exact[:, 1] - exact[:, 0]).mean())
    diff = poisson.mean(axis=0) - exact.mean(axis=0)
    error = np.sqrt((exact.var(axis=0, ddof=1) + poisson.var(axis=0, ddof=1)) / seeds)
    within = np.abs(diff) <= 2 * np.maximum(error, 1e-12)
    return {"width_exact": width,
            "ratio": float((poisson[:, 1] - poisson[:, 0]).mean()) / width,
            "d_lo": diff[0] / width, "d_hi": diff[1] / width, "se_lo": error[0] / width,
            "se_hi": error[1] / width, "agree": float(within.mean())}


def value_runs(runs: int, n: int, seeds: int, resamples: int) -> list[dict[str, float]]:
    metric = create("mrr")  # a carrier: its summary is the mean of the values given
    rng = np.random.default_rng(n)
    shapes = list(SHAPES.values())
    out = []
    for run in range(runs):
        values = shapes[run % len(shapes)](rng, n)
        part = MetricResult({metric.output_names()[0]: values}, [None] * n)
        out.append(compare_run(metric, part, n, seeds, resamples))
    return out


def bleu_runs(runs: int, n: int, seeds: int, resamples: int) -> list[dict[str, float]]:
    metric = create("bleu")
    words = [f"w{i}" for i in range(300)]
    out = []
    for run in range(runs):
        rng = random.Random(run)
        items = []
        for i in range(n):
            answer = rng.choices(words, k=rng.randint(8, 40))
            reference = answer[rng.randint(0, 5):] + rng.choices(words, k=rng.randint(0, 10))
            items.append({"id": f"r{i}", "query": "q", "answer": " ".join(answer),
                          "reference": " ".join(reference)})
        part = metric.score(Batch(records_from_dicts(items)))
        out.append(compare_run(metric, part, n, seeds, resamples))
    return out


def row(label: str, results: list[dict[str, float]]) -> str:
    mean = {k: float(np.mean([r[k] for r in results])) for k in results[0]}
    return (f"{label:>16} {len(results):>5} {mean['width_exact']:>11.4g} "
            f"{mean['ratio']:>8.3f} {mean['d_lo']:>+9.4f} "
            f"{mean['d_hi']:>+9.4f} {mean['se_lo']:>8.4f} {mean['se_hi']:>8.4f} "
            f"{100 * mean['agree']:>7.0f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--sizes", default="50,500,5000")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--bleu-runs", type=int, default=100)
    parser.add_argument("--bleu-size", type=int, default=300)
    args = parser.parse_args()
    print(f"exact percentile bootstrap vs Poisson bootstrap, {args.resamples} resamples, "
          f"{args.seeds} seeds per method and run; differences as a share of the exact width")
    print(f"{'runs of n':>16} {'runs':>5} {'exact width':>11} {'P/E wid':>8} {'d lo':>9} "
          f"{'d hi':>9} {'se lo':>8} {'se hi':>8} {'agree':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        print(row(f"mean, n={n:,}", value_runs(args.runs, n, args.seeds, args.resamples)))
    if args.bleu_runs:
        print(row(f"BLEU, n={args.bleu_size:,}",
                  bleu_runs(args.bleu_runs, args.bleu_size, args.seeds, args.resamples)))


if __name__ == "__main__":
    main()
