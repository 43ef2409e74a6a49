"""End to end: ``rageval score`` against rouge-score and sacrebleu from the same JSONL file.

    python bench/bench_score.py [--pairs 20000] [--repeats 3] [--seed 0] [--json PATH]

Every side is a fresh Python process timed from start to exit (wall time and peak RSS from
``os.wait4``): interpreter start-up, imports, reading the records file, scoring, and writing one
JSON line of results per record.

* ROUGE. Anchor: a script that reads each line with ``json.loads``, calls
  ``RougeScorer(["rouge1", "rouge2", "rougeL"]).score(reference, answer)`` and writes the nine
  precision/recall/F values with ``json.dumps``. rageval: ``rageval score FILE -m rouge1
  -m rouge2 -m rougeL --out DIR``.
* BLEU. Anchor: the same reading and writing around sacrebleu's
  ``BLEU(effective_order=True).sentence_score`` per pair, then ``corpus_bleu`` over all pairs.
  rageval: ``rageval score FILE -m bleu --out DIR``.

rageval runs with its defaults, so its time also holds what the anchors do not do: record
validation, the summary with a 1000-resample bootstrap 95% CI per metric, ``summary.json`` and
the SHA-256 of the records file. After timing, every value rageval wrote is compared with the
anchor's for exact equality (``==`` on the floats read back from both files).

The pairs are those of ``bench_rouge.py`` (answer-like, 40-80 words, seeded).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_proc import rageval_command, run_process

ROOT = Path(__file__).resolve().parents[1]
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
PARTS = ("precision", "recall", "fmeasure")

_ROUGE_ANCHOR = """
import json, sys
from rouge_score import rouge_scorer
types = ("rouge1", "rouge2", "rougeL")
scorer = rouge_scorer.RougeScorer(list(types))
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w") as out:
    for line in src:
        record = json.loads(line)
        s = scorer.score(record["reference"], record["answer"])
        scores = {f"{t}.{p}": getattr(s[t], p) for t in types
                  for p in ("precision", "recall", "fmeasure")}
        out.write(json.dumps({"id": record["id"], "scores": scores}) + "\\n")
"""

_BLEU_ANCHOR = """
import json, sys
import sacrebleu
from sacrebleu.metrics import BLEU
with open(sys.argv[1], encoding="utf-8") as src:
    records = [json.loads(line) for line in src]
bleu = BLEU(effective_order=True)
answers = [r["answer"] for r in records]
references = [r["reference"] for r in records]
with open(sys.argv[2], "w") as out:
    for record, answer, reference in zip(records, answers, references):
        value = bleu.sentence_score(answer, [reference]).score
        out.write(json.dumps({"id": record["id"], "scores": {"bleu.sentence": value}}) + "\\n")
    corpus = sacrebleu.corpus_bleu(answers, [references]).score
    out.write(json.dumps({"id": None, "scores": {"bleu": corpus}}) + "\\n")
"""


def records_file(data_dir: Path, pairs: int, seed: int) -> Path:
    """The JSONL records of ``pairs`` seeded pairs, written once (by a child process, so that
    this one imports nothing heavy: see bench_proc) and reused."""
    path = data_dir / f"score_{pairs}_{seed}.jsonl"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, __file__, "--write-records", str(path),
                        "--pairs", str(pairs), "--seed", str(seed)], check=True)
    return path


def write_records(path: Path, pairs: int, seed: int) -> None:
    from bench_rouge import generate_pairs

    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for i, (reference, answer) in enumerate(generate_pairs(pairs, seed)):
            record = {"id": f"r{i}", "query": f"question {i}", "answer": answer,
                      "reference": reference}
            out.write(json.dumps(record) + "\n")
    tmp.replace(path)


def anchor_values(path: Path) -> dict[str, dict[str, float]]:
    with open(path, encoding="utf-8") as src:
        rows = [json.loads(line) for line in src]
    return {str(row["id"]): row["scores"] for row in rows}


def rageval_values(out_dir: Path) -> dict[str, dict[str, float]]:
    with open(out_dir / "records.jsonl", encoding="utf-8") as src:
        values = {row["id"]: row["scores"] for row in map(json.loads, src)}
    summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    values["None"] = {name: entry["value"] for name, entry in summary["metrics"].items()}
    return values


def mismatches(anchor: dict[str, dict[str, float]], ours: dict[str, dict[str, float]]) -> int:
    """Values of the anchor that rageval did not write identically."""
    bad = 0
    for rid, scores in anchor.items():
        mine = ours.get(rid, {})
        bad += sum(1 for name, value in scores.items() if mine.get(name) != value)
    return bad


def measure(name: str, anchor_code: str, metrics: list[str], data: Path,
            args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Time both sides (interleaved, so that drift in load hits both alike); the outputs stay
    in ``tmp`` for :func:`check`, done after every task is timed so that this process stays
    small while children run."""
    anchor_runs, ours_runs = [], []
    anchor_out, ours_out = tmp / f"{name}.anchor.jsonl", tmp / f"{name}.out"
    anchor_cmd = [sys.executable, "-c", anchor_code, str(data), str(anchor_out)]
    ours_cmd = [*rageval_command(args.source), "score", str(data), "--out", str(ours_out),
                "--no-progress", *[a for m in metrics for a in ("-m", m)]]
    for _ in range(args.repeats):
        anchor_runs.append(run_process(anchor_cmd, str(tmp)))
        ours_runs.append(run_process(ours_cmd, str(tmp)))
    anchor_s = statistics.median(w for w, _ in anchor_runs)
    ours_s = statistics.median(w for w, _ in ours_runs)
    return {
        "task": name, "anchor_s": anchor_s, "rageval_s": ours_s, "ratio": anchor_s / ours_s,
        "anchor_rss_mib": statistics.median(r for _, r in anchor_runs) / 1024,
        "rageval_rss_mib": statistics.median(r for _, r in ours_runs) / 1024,
        "anchor_runs_s": [w for w, _ in anchor_runs], "rageval_runs_s": [w for w, _ in ours_runs],
        "outputs": (str(anchor_out), str(ours_out)),
    }


def check(row: dict[str, Any]) -> None:
    """How many of the anchor's values rageval did not write identically."""
    anchor_out, ours_out = row.pop("outputs")
    row["mismatches"] = mismatches(anchor_values(Path(anchor_out)), rageval_values(Path(ours_out)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("rouge", "bleu"), help="time one task only")
    parser.add_argument("--source", help="run rageval from this checkout instead")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "bench" / "data")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--write-records", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_records:
        write_records(args.write_records, args.pairs, args.seed)
        return
    data = records_file(args.data_dir, args.pairs, args.seed)
    tasks = {
        "rouge1+rouge2+rougeL vs rouge-score": ("rouge", _ROUGE_ANCHOR, list(ROUGE_TYPES)),
        "bleu (sentence + corpus) vs sacrebleu": ("bleu", _BLEU_ANCHOR, ["bleu"]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(name, code, metrics, data, args, Path(tmp))
                for name, (key, code, metrics) in tasks.items() if args.only in (None, key)]
        for row in rows:
            check(row)
    print(f"{args.pairs:,} pairs, median of {args.repeats}, whole processes "
          f"(python {platform.python_version()}, {os.cpu_count()} CPUs)")
    print(f"{'task':<40}{'anchor s':>10}{'rageval s':>11}{'ratio':>8}"
          f"{'anchor MiB':>12}{'rageval MiB':>13}{'identical':>11}")
    for row in rows:
        same = "yes" if row["mismatches"] == 0 else f"no ({row['mismatches']})"
        print(f"{row['task']:<40}{row['anchor_s']:>10.2f}{row['rageval_s']:>11.2f}"
              f"{row['ratio']:>7.1f}x{row['anchor_rss_mib']:>12.0f}{row['rageval_rss_mib']:>13.0f}"
              f"{same:>11}")
    if args.json:
        args.json.write_text(json.dumps({"pairs": args.pairs, "repeats": args.repeats,
                                         "rows": rows}, indent=2) + "\n")
    if any(row["mismatches"] for row in rows):
        sys.exit("bench_score: rageval's values differ from the anchor's")


if __name__ == "__main__":
    main()
