"""The shipped calibration example (fixtures/calibration): the real local model's replies replay
offline with no request, and the calibrated mean is ppi_py's on the replayed scores and the
hand labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rageval.api import evaluate
from rageval.judge.llm.options import JudgeOptions

ROOT = Path(__file__).resolve().parents[3] / "fixtures" / "calibration"


@pytest.mark.parity
def test_the_example_replays_and_calibrates_as_ppi_py_does(tmp_path: Path) -> None:
    ppi_py = pytest.importorskip("ppi_py")
    judge = JudgeOptions(model="smollm2-135m-instruct", offline=True,
                         cache=str(ROOT / "judge_cache.jsonl"))
    results = evaluate(ROOT / "records.jsonl", ["judge:faithfulness"], judge=judge,
                       human="human", bootstrap=50)
    assert results.manifest["judge"]["requests"] == 0
    assert results.manifest["judge"]["cache"]["misses"] == 0
    labels = {json.loads(line)["id"]: (json.loads(line).get("human") or {}).get("faithfulness")
              for line in (ROOT / "records.jsonl").read_text().splitlines()}
    assert sum(label is not None for label in labels.values()) == 20
    scores = {r.id: r.scores["judge:faithfulness"] for r in results.records}
    y = np.array([labels[i] for i in scores if labels[i] is not None], dtype=float)
    f = np.array([scores[i] for i in scores if labels[i] is not None], dtype=float)
    f_unlabelled = np.array([scores[i] for i in scores if labels[i] is None], dtype=float)
    c = results.summary["judge:faithfulness"].calibrated
    assert c is not None and c.ci95 is not None and c.tuned_ci95 is not None
    low, high = ppi_py.ppi_mean_ci(y, f, f_unlabelled, alpha=0.05, lam=1)
    assert (c.mean, *c.ci95) == pytest.approx(
        (float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, f_unlabelled, lam=1))),
         float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9)
    low, high = ppi_py.ppi_mean_ci(y, f, f_unlabelled, alpha=0.05)
    assert c.tuned_ci95 == pytest.approx((float(np.squeeze(low)), float(np.squeeze(high))),
                                         abs=1e-9)
    assert c.human_mean == pytest.approx(y.mean())
    assert not (ROOT / "judge_cache.sqlite").exists()  # the replay wrote nothing beside
