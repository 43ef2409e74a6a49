"""The summary as running sums (the Poisson bootstrap): weights that are a function of (seed,
record id, resample), exact means, intervals equal to a hand computation and the same to the
last digit however the run is split; the switch from every value kept to running sums."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_streaming import LEXICAL, comparable, write_records

from rageval.api import evaluate
from rageval.cli import main
from rageval.compare.runs.corpus import corpus_resampler
from rageval.compare.runs.statistics import signature_diff
from rageval.core.errors import UsageError
from rageval.core.metric import MetricResult
from rageval.core.records import Conversation, Record, load_records
from rageval.core.registry import create
from rageval.engine import settings as settings_module
from rageval.stats import poisson
from rageval.stats.exact import ExactSums
from rageval.stats.poisson import block_rows, poisson_weights, seeded_keys, unit_keys
from rageval.stats.resampling import percentile_interval
from rageval.summary import SummaryParts
from rageval.summary.online import OnlineStore


def _weights(ids: list[str], seed: int, resamples: int) -> np.ndarray:
    return poisson_weights(seeded_keys(unit_keys(ids), seed), resamples)


def test_weights_are_a_function_of_seed_id_and_resample() -> None:
    ids = [f"r{i}" for i in range(50)]
    whole = _weights(ids, 7, 300)
    assert whole.shape == (50, 300)
    np.testing.assert_array_equal(_weights(ids[10:20], 7, 300), whole[10:20])
    np.testing.assert_array_equal(_weights(ids[::-1], 7, 300), whole[::-1])
    np.testing.assert_array_equal(_weights(ids, 7, 120), whole[:, :120])  # resample by index
    assert (_weights(ids, 8, 300) != whole).mean() > 0.5


def test_weights_follow_poisson_one() -> None:
    weights = _weights([f"id-{i}" for i in range(4000)], 0, 500).ravel()  # 2,000,000 draws
    n = len(weights)
    for k in range(8):
        expected = n * math.exp(-1) / math.factorial(k)
        # Within 5 standard deviations of a binomial count.
        assert abs((weights == k).sum() - expected) < 5 * math.sqrt(expected) + 1
    assert weights.max() < 14
    assert abs(weights.mean() - 1) < 5 / math.sqrt(n)
    # Neighbouring resamples and neighbouring ids are uncorrelated.
    grid = weights.reshape(4000, 500)
    assert abs(np.corrcoef(grid[:, 0], grid[:, 1])[0, 1]) < 0.06
    assert abs(np.corrcoef(grid[:-1, 0], grid[1:, 0])[0, 1]) < 0.06


_ANY_FLOAT = st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e300,
                       max_value=1e300)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_ANY_FLOAT, min_size=0, max_size=20), min_size=1, max_size=5))
def test_exact_sums_are_exact_whatever_the_split(chunks: list[list[float]]) -> None:
    sums = ExactSums(1)
    for chunk in chunks:
        sums.add(np.array(chunk, dtype=np.float64).reshape(-1, 1))
    values = [v for chunk in chunks for v in chunk]
    exact = sum((Fraction(v) for v in values), Fraction(0))
    assert sums.value(0) == float(exact)
    if values:
        assert sums.mean(0, len(values)) == float(exact / len(values))


def _part(values: list[float], name: str) -> MetricResult:
    return MetricResult({name: np.array(values, dtype=np.float64)}, [None] * len(values))


def test_interval_equals_the_weighted_means_by_hand() -> None:
    metric = create("mrr")
    name = metric.output_names()[0]
    rng = np.random.default_rng(3)
    values = rng.random(700)
    values[::9] = np.nan
    ids = [f"q{i}" for i in range(700)]
    parts = SummaryParts([metric], seed=11, bootstrap=400, exact_records=0)
    records = load_records_like(ids)
    for start in range(0, 700, 64):
        parts.add_records(records[start:start + 64])
        parts.add_part(metric, _part(list(values[start:start + 64]), name), [None] * 64)
    item = parts.summarise([metric], 11, 400)[name]
    weights = _weights(ids, 11, 400)
    scored = ~np.isnan(values)
    means = (weights[scored].T @ values[scored]) / weights[scored].sum(axis=0)
    expected = percentile_interval(means)
    assert item.ci95 is not None and expected is not None
    assert item.ci95 == pytest.approx(expected, rel=1e-12)
    assert item.value == float(sum(Fraction(v) for v in values[scored]) / int(scored.sum()))
    assert (item.n, item.unscored, item.ci_method) == (int(scored.sum()), 78, "poisson")
    assert item.signature.split("|")[-2] == "ci:poisson"


def load_records_like(ids: list[str]) -> list[Record]:
    return [Record(i, query="q") for i in ids]


@settings(max_examples=12, deadline=None)
@given(count=st.integers(1, 60), window=st.integers(1, 61), batch=st.integers(1, 20),
       seed=st.integers(0, 3))
def test_running_sums_never_depend_on_window_or_batch(
        tmp_path_factory: pytest.TempPathFactory, count: int, window: int, batch: int,
        seed: int) -> None:
    path = write_records(tmp_path_factory.mktemp("p") / "r.jsonl", count, seed)
    whole = evaluate(path, LEXICAL, bootstrap=50, window=count, ci="poisson")
    parts = evaluate(path, LEXICAL, bootstrap=50, window=window, batch_size=batch,
                     ci="poisson")
    assert comparable(parts) == comparable(whole)


def test_order_changes_the_sums_only_in_their_last_bits(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", 300, 1)
    lines = path.read_text().splitlines()
    shuffled = tmp_path / "s.jsonl"
    rng = np.random.default_rng(0)
    shuffled.write_text("\n".join(lines[i] for i in rng.permutation(len(lines))) + "\n")
    a = evaluate(path, LEXICAL, bootstrap=200, ci="poisson").summary
    b = evaluate(shuffled, LEXICAL, bootstrap=200, ci="poisson").summary
    for name, item in a.items():
        assert b[name].value == item.value or b[name].value == pytest.approx(item.value,
                                                                             rel=1e-12)
        assert b[name].ci95 == pytest.approx(item.ci95, rel=1e-9)


@pytest.mark.parametrize("cells", [1 << 20, 3000])
def test_past_the_limit_the_run_equals_running_sums_from_the_start(
        monkeypatch: pytest.MonkeyPatch, cells: int) -> None:
    monkeypatch.setattr(poisson, "_BLOCK_CELLS", cells)  # blocks of 10,485 or 30 records
    metrics = [create(name) for name in ("ndcg@3", "map", "mrr", "rouge1")]
    rng = np.random.default_rng(5)
    rows = block_rows(100) * 2 + 17 if cells > 3000 else 317
    records = load_records_like([f"x{i}" for i in range(rows)])
    batches = []
    for start in range(0, rows, 40):
        size = len(records[start:start + 40])
        values = {str(m): {n: rng.random(size) for n in m.output_names()} for m in metrics}
        batches.append((start, size, values))
    runs = []
    for limit in (0, 100, 10**9):
        parts = SummaryParts(metrics, seed=2, bootstrap=100, exact_records=limit)
        for start, size, values in batches:
            parts.add_records(records[start:start + size])
            for metric in metrics:
                parts.add_part(metric, MetricResult(values[str(metric)], [None] * size),
                               [None] * size)
        runs.append(parts.summarise(metrics, 2, 100))
    assert runs[0] == runs[1]
    assert {item.ci_method for item in runs[1].values()} == {"poisson"}
    assert {item.ci_method for item in runs[2].values()} == {"records"}
    for name, item in runs[2].items():  # the exact bootstrap: the same values
        assert runs[0][name].value == pytest.approx(item.value, rel=1e-12)


def test_corpus_bleu_from_summed_statistics(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", 200, 2)
    exact = evaluate(path, ["bleu"], bootstrap=300).summary
    online = evaluate(path, ["bleu"], bootstrap=300, ci="poisson").summary
    for name, item in exact.items():
        assert online[name].value == pytest.approx(item.value, rel=1e-12)
        assert online[name].aggregate == item.aggregate
        assert online[name].signature.replace("|ci:poisson", "") == item.signature
    # The interval by hand: each resample's corpus BLEU from its weighted statistics.
    ids = [r.id for r in load_records(path)]
    rows = [json.loads(line) for line in
            evaluate(path, ["bleu"], bootstrap=10, out=tmp_path / "o")
            .records.path.read_text().splitlines()]  # type: ignore[union-attr]
    assert [row["id"] for row in rows] == ids
    weights = _weights(ids, 0, 300)
    scorer = corpus_resampler("bleu", [row["details"]["bleu"] for row in rows])
    by_hand = percentile_interval(scorer(weights.T))
    assert online["bleu"].ci95 == pytest.approx(by_hand, rel=1e-12)


class _Stable(type(create("map"))):  # type: ignore[misc]
    """map, as a metric whose summary reads every record."""

    def summary_keeps_rows(self) -> bool:
        return True


def test_metrics_that_read_every_record_keep_every_value() -> None:
    metric = _Stable()
    name = metric.output_names()[0]
    parts = SummaryParts([metric], seed=0, bootstrap=50, exact_records=0)
    records = load_records_like([f"k{i}" for i in range(30)])
    parts.add_records(records)
    parts.add_part(metric, _part(list(np.linspace(0, 1, 30)), name), [None] * 30)
    assert parts.summarise([metric], 0, 50)[name].ci_method == "records"
    assert name == "map"


def _conversation_run(metrics: list, limit: int | None) -> dict:
    """Two conversations of three turns and two records on their own, in batches of two."""
    turns = [t for c in ("c1", "c2") for t in Conversation(
        c, tuple(Record(f"{c}-{k}", query="q") for k in range(3))).records()]
    records = [*load_records_like(["a"]), *turns, *load_records_like(["b"])]
    values = [0.1, 0.5, np.nan, 0.9, 0.2, 0.4, 0.8, 0.3]
    parts = SummaryParts(metrics, bootstrap=40, exact_records=limit)
    for start in range(0, len(records), 2):
        parts.add_records(records[start:start + 2])
        for metric in metrics:
            parts.add_part(metric, _part(values[start:start + 2], str(metric)), [None] * 2)
    return parts.summarise(metrics, 0, 40)


def test_a_metric_kept_whole_beside_running_sums_keeps_its_conversations() -> None:
    kept, summed = _Stable(), create("mrr")
    mixed = _conversation_run([kept, summed], limit=3)
    assert mixed["mrr"] == _conversation_run([summed], limit=0)["mrr"]
    assert mixed["mrr"].ci_method == "poisson"
    alone = _conversation_run([kept], limit=None)["map"]
    assert mixed["map"] == alone and alone.ci_method == "conversations"
    assert mixed["mrr"].n == alone.n == 4  # two conversations, two records on their own


def test_running_sums_refuse_another_seed_and_human_labels() -> None:
    metric = create("mrr")
    parts = SummaryParts([metric], seed=1, bootstrap=20, exact_records=0)
    parts.add_records(load_records_like(["a", "b"]))
    parts.add_part(metric, _part([0.5, 1.0], "mrr"), [None] * 2)
    with pytest.raises(UsageError, match="human labels need every value kept"):
        parts.add_labels("mrr", [1.0, 0.0])
    with pytest.raises(ValueError, match="another seed or resample count"):
        parts.summarise([metric], 2, 20)
    assert parts.summarise([metric], 1, 20)["mrr"].n == 2


def test_online_store_counts_flags_and_keeps_distinct_details() -> None:
    metric = create("mrr")
    name = metric.output_names()[0]
    store = OnlineStore(metric, [name])
    shared = {"endpoint": "a", "flags": ["x"]}
    store.add(MetricResult({name: np.ones(3)}, [], [shared, shared, {"flags": ["y"]}]),
              np.arange(3), open_last=False)
    assert store.flagged == Counter({"x": 2, "y": 1})
    assert len(store.signature_part().details or []) == 2


def test_the_interval_method_is_no_configuration_difference() -> None:
    assert signature_diff("m:mrr|ci:poisson|rageval:1", "m:mrr|rageval:1") == {}
    assert signature_diff("m:mrr|k:3|ci:poisson", "m:mrr|k:4") == {"k": ["3", "4"]}


def write_conversations(path: Path, count: int, seed: int) -> Path:
    """``count`` conversations of 1 to 4 turns, with a record on its own every fifth."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    lines = []
    for c in range(count):
        turns = [{"query": f"q{c}-{t}", "answer": " ".join(rng.choice(words, 5)),
                  "reference": " ".join(rng.choice(words, 5)),
                  "contexts": [{"id": f"d{k}", "text": "x"} for k in range(3)],
                  "judgments": {f"d{k}": int(rng.integers(0, 2)) for k in range(3)}}
                 for t in range(int(rng.integers(1, 5)))]
        if rng.random() < 0.3:
            turns[-1].pop("reference")  # an unscored last turn
        lines.append({"id": f"c{c}", "turns": turns})
        if c % 5 == 4:
            lines.append({"id": f"r{c}", **turns[0]})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


CONVERSATION_METRICS = ["mrr", "rouge1", "bleu"]


@settings(max_examples=10, deadline=None)
@given(count=st.integers(1, 30), window=st.integers(1, 20), batch=st.integers(1, 9),
       seed=st.integers(0, 3))
def test_conversations_in_running_sums_never_depend_on_the_split(
        tmp_path_factory: pytest.TempPathFactory, count: int, window: int, batch: int,
        seed: int) -> None:
    path = write_conversations(tmp_path_factory.mktemp("c") / "c.jsonl", count, seed)
    whole = evaluate(path, CONVERSATION_METRICS, bootstrap=40, window=10**6, ci="poisson")
    parts = evaluate(path, CONVERSATION_METRICS, bootstrap=40, window=window,
                     batch_size=batch, ci="poisson")
    assert comparable(parts) == comparable(whole)


def test_conversations_are_weighed_whole(tmp_path: Path) -> None:
    path = write_conversations(tmp_path / "c.jsonl", 120, 4)
    exact = evaluate(path, CONVERSATION_METRICS, bootstrap=300).summary
    online = evaluate(path, CONVERSATION_METRICS, bootstrap=300, ci="poisson")
    records = list(online.records)
    for name in ("mrr", "rouge1", "bleu.sentence"):
        item, held = online.summary[name], exact[name]
        assert (item.n, item.unscored) == (held.n, held.unscored)
        assert item.value == pytest.approx(held.value, rel=1e-12)
        for key in ("conversation_min", "conversation_last"):
            assert item.figures[key] == pytest.approx(held.figures[key], rel=1e-12)
        assert item.figures["turns"] == held.figures["turns"]
        assert "unit:conversation" in item.signature and "ci:poisson" in item.signature
    # By hand: each conversation's mean, weighed by its id's weights.
    means: dict[str, list[float]] = {}
    for row in records:
        unit = row.conversation or row.id
        value = row.scores.get("mrr")
        means.setdefault(unit, [])
        if value is not None and not math.isnan(value):
            means[unit].append(value)
    units = [u for u, v in means.items() if v]
    values = np.array([np.mean(means[u]) for u in units])
    weights = _weights(units, 0, 300)
    expected = percentile_interval(weights.T @ values / weights.sum(axis=0))
    assert online.summary["mrr"].ci95 == pytest.approx(expected, rel=1e-9)
    assert exact["bleu"].value == pytest.approx(online.summary["bleu"].value, rel=1e-12)


def test_a_conversation_after_the_switch_is_summed_whole(tmp_path: Path) -> None:
    metric = create("mrr")
    name = metric.output_names()[0]
    conversation = Conversation("conv", (Record("t1", query="a"), Record("t2", query="b")))
    turns = conversation.records()
    runs = []
    for limit in (0, 2, 10**6):
        parts = SummaryParts([metric], bootstrap=30, exact_records=limit)
        for batch in (load_records_like(["a", "b", "c"]), turns[:1], turns[1:]):
            parts.add_records(batch)
            parts.add_part(metric, _part([0.5] * len(batch), name), [None] * len(batch))
        runs.append(parts.summarise([metric], 0, 30)[name])
    assert runs[0] == runs[1]
    assert (runs[0].n, runs[0].ci_method, runs[2].ci_method) == (4, "poisson", "conversations")


@pytest.mark.parametrize("limit", [3, 8, 21])
def test_a_run_of_conversations_past_the_limit_equals_running_sums_from_the_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    path = write_conversations(tmp_path / "c.jsonl", 25, 6)
    from_start = evaluate(path, CONVERSATION_METRICS, bootstrap=40, ci="poisson", batch_size=4)
    monkeypatch.setattr(settings_module, "EXACT_RECORDS", limit)
    switched = evaluate(path, CONVERSATION_METRICS, bootstrap=40, batch_size=4, window=6)
    assert {n: s.to_json() for n, s in switched.summary.items()} == {
        n: s.to_json() for n, s in from_start.summary.items()}


def test_cli_takes_ci_poisson(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_records(tmp_path / "r.jsonl", 30, 0)
    assert main(["score", str(path), "-m", "mrr", "--ci", "poisson", "--bootstrap", "100",
                 "--out", str(tmp_path / "o")]) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["metrics"]["mrr"]["ci_method"] == "poisson"
    capsys.readouterr()
