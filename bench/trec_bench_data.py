"""The seeded qrels and run files of bench_trec.py, generated once and cached.

For every topic: ``docs`` distinct document ids ranked by descending scores (multiples of 1/64,
written with six exact decimals) and ``judged`` graded judgments, 80% of retrieved documents
(the top ranks more often) and the rest of documents the run did not retrieve.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path


def data_paths(
    data_dir: Path, queries: int, docs: int, judged: int, seed: int
) -> tuple[Path, Path]:
    tag = f"{queries}q-{docs}d-{judged}j-seed{seed}"
    return data_dir / f"qrels-{tag}.txt", data_dir / f"run-{tag}.txt"


def generate(
    data_dir: Path, queries: int, docs: int, judged: int, seed: int, *, quiet: bool = False
) -> tuple[Path, Path]:
    """Write the qrels and run files unless they already exist; return their paths."""
    import numpy as np

    qrels_path, run_path = data_paths(data_dir, queries, docs, judged, seed)
    if qrels_path.exists() and run_path.exists():
        if not quiet:
            print(f"using cached data: {qrels_path.name}, {run_path.name}")
        return qrels_path, run_path
    data_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    n_from_run = min(docs, round(judged * 0.8))  # most judgments are of retrieved documents
    rank_weights = 1.0 / np.sqrt(np.arange(1, docs + 1))  # assessors see the top ranks more
    rank_weights /= rank_weights.sum()
    label_p = [0.5, 0.25, 0.15, 0.1]
    with (
        tempfile.NamedTemporaryFile("w", dir=data_dir, delete=False, suffix=".tmp") as qf,
        tempfile.NamedTemporaryFile("w", dir=data_dir, delete=False, suffix=".tmp") as rf,
    ):
        for q in range(queries):
            qid = str(401 + q)
            doc_ids = rng.choice(9_000_000, size=docs + judged, replace=False) + 1_000_000
            retrieved, spare = doc_ids[:docs], doc_ids[docs:]
            # Descending scores in a BM25-like range, multiples of 1/64: six exact decimals.
            scores = np.sort(rng.integers(2 * 64, 48 * 64, size=docs))[::-1] / 64.0
            rf.write(
                "".join(
                    f"{qid} Q0 doc{d} {r} {s:.6f} bench\n"
                    for r, (d, s) in enumerate(
                        zip(retrieved.tolist(), scores.tolist(), strict=True), start=1
                    )
                )
            )
            ranks = rng.choice(docs, size=n_from_run, replace=False, p=rank_weights)
            judged_ids = list(retrieved[ranks]) + list(spare[: judged - n_from_run])
            labels = rng.choice(4, size=len(judged_ids), p=label_p)
            qf.write(
                "".join(
                    f"{qid} 0 doc{d} {lab}\n" for d, lab in zip(judged_ids, labels, strict=True)
                )
            )
    for tmp, final in ((qf.name, qrels_path), (rf.name, run_path)):
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    if not quiet:
        print(
            f"generated {queries} queries x {docs} docs ({judged} judgments per query) "
            f"in {time.perf_counter() - start:.1f} s"
        )
    return qrels_path, run_path
