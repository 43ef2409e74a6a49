"""BLEU: parity with sacrebleu per record and for the corpus, the worked examples, the contract."""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU as SacreBLEU

import rageval.generation.bleu  # registers "bleu"
from rageval.api import evaluate
from rageval.core.errors import UsageError
from rageval.core.metric import NO_ANSWER, NO_REFERENCE, Batch, Metric
from rageval.core.records import Record, records_from_dicts
from rageval.core.registry import create
from rageval.generation.bleu import COMPONENTS, SMOOTH_METHODS, Bleu

_VOCABULARY = (
    "the a cat dog sat on mat The Cat revenue grew 12 % 3.5 1,000 in Q3 , . ! ? ( ) \" ' "
    "don't state-of-the-art U.S. e.g. café naïve Zürich &amp; &quot; <skipped> 中文 模型 检索 "
    "增强 生成 。 ， 2024. x-ray 50$ €20"
)
WORDS = _VOCABULARY.split()


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    return " ".join(words) if rng.random() < 0.8 else "".join(words)


def _near(rng: random.Random, text: str) -> str:
    """A reference sharing much of ``text``: words dropped, replaced, swapped."""
    words = text.split() or [rng.choice(WORDS)]
    out = [w if rng.random() < 0.7 else rng.choice(WORDS) for w in words if rng.random() < 0.9]
    if len(out) > 2 and rng.random() < 0.5:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out + [rng.choice(WORDS) for _ in range(rng.randint(0, 3))])


def _generated(seed: int, n: int, max_refs: int) -> list[tuple[str, list[str]]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        answer = "" if rng.random() < 0.03 else _sentence(rng, 1, 30)
        refs = [_near(rng, answer) for _ in range(rng.randint(1, max_refs))]
        if rng.random() < 0.03:
            refs[0] = ""
        pairs.append((answer, refs))
    return pairs


def _records(pairs: list[tuple[str, list[str]]]) -> list[Record]:
    return [Record(id=str(i), answer=a, references=tuple(r)) for i, (a, r) in enumerate(pairs)]


def _streams(refs: list[list[str]]) -> list[list[str | None]]:
    width = max(len(r) for r in refs)
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


def _sacre_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "tokenize": params.get("tokenize", "13a"),
        "lowercase": params.get("lowercase", False),
        "smooth_method": params.get("smooth", "exp"),
        "smooth_value": params.get("smooth_value"),
    }


def _name(params: dict[str, Any]) -> str:
    if not params:
        return "bleu"
    rendered = {k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()}
    return "bleu(" + ",".join(f"{k}={v}" for k, v in rendered.items()) + ")"


def _score_one(answer: str, refs: list[str], **params: Any) -> tuple[dict[str, float], dict]:
    metric = create(_name(params))
    result = metric.score(Batch([Record(id="x", answer=answer, references=tuple(refs))]))
    assert result.details is not None and result.details[0] is not None
    head = str(metric.name)  # keys as for plain "bleu": "bleu", "bleu.bp", ...
    values = {"bleu" + n[len(head):]: float(v[0]) for n, v in result.values.items()}
    return values, result.details[0]


CONFIGS: list[dict[str, Any]] = [
    {},
    {"tokenize": "intl", "lowercase": True},
    {"tokenize": "zh"},
    {"tokenize": "char", "smooth": "floor"},
    {"tokenize": "none", "smooth": "none"},
    {"smooth": "add-k"},
    {"smooth": "add-k", "smooth_value": 0.5, "lowercase": True},
    {"smooth": "floor", "smooth_value": 0.01, "tokenize": "intl"},
]


# ---- parity with sacrebleu --------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("params", CONFIGS, ids=_name)
@pytest.mark.parametrize("max_refs", [1, 3])
def test_per_record_and_corpus_parity(params: dict[str, Any], max_refs: int) -> None:
    pairs = _generated(seed=CONFIGS.index(params) * 10 + max_refs, n=150, max_refs=max_refs)
    name = str(create(_name(params)).name)
    results = evaluate(_records(pairs), [name], bootstrap=1, batch_size=64)
    sentence = SacreBLEU(effective_order=True, **_sacre_kwargs(params))
    for (answer, refs), row in zip(pairs, results.records, strict=True):
        expected = sentence.sentence_score(answer, refs)
        scores, details = row.scores, row.details[name]
        assert scores[name] == expected.score
        assert scores[f"{name}.sentence"] == expected.score
        assert scores[f"{name}.bp"] == expected.bp
        assert scores[f"{name}.ratio"] == expected.ratio
        assert [scores[f"{name}.p{n}"] for n in range(1, 5)] == expected.precisions
        assert details["sys_len"] == expected.sys_len and details["ref_len"] == expected.ref_len
        assert details["nrefs"] == len(refs)
        if params.get("smooth") != "add-k":  # sacrebleu's add-k adds k to its own counts
            assert details["counts"] == expected.counts
            assert details["totals"] == expected.totals
    corpus = sacrebleu.corpus_bleu(
        [a for a, _ in pairs], _streams([r for _, r in pairs]), **_sacre_kwargs(params)
    )
    assert results.summary[name].value == corpus.score
    assert results.summary[name].aggregate == "corpus"


@pytest.mark.parity
def test_statistics_are_sacrebleus_before_smoothing() -> None:
    pairs = _generated(seed=5, n=60, max_refs=2)
    metric = create("bleu(smooth=add-k)")
    result = metric.score(Batch(_records(pairs)))
    plain = SacreBLEU(effective_order=True, smooth_method="none")
    for (answer, refs), details in zip(pairs, result.details or [], strict=True):
        expected = plain.sentence_score(answer, refs)
        assert details is not None
        assert details["counts"] == expected.counts and details["totals"] == expected.totals


@pytest.mark.parity
def test_variable_reference_counts_match_padded_corpus_bleu() -> None:
    rng = random.Random(11)
    pairs = [(answer, [_near(rng, answer) for _ in range(k)])
             for answer, k in ((_sentence(rng, 3, 25), rng.choice([1, 2, 4])) for _ in range(120))]
    pairs[0] = (pairs[0][0], pairs[0][1][:1])  # the first stream is the one sacrebleu checks
    metric = Bleu()
    records = _records(pairs)
    result = metric.score(Batch(records))
    streams = _streams([r for _, r in pairs])
    assert any(s is None for s in streams[-1])
    expected = sacrebleu.corpus_bleu([a for a, _ in pairs], streams)
    assert metric.corpus_value(result, np.arange(len(pairs))) == expected.score
    assert evaluate(records, ["bleu"], bootstrap=1).summary["bleu"].value == expected.score
    assert "|nrefs:var|" in metric.result_signature(result).format()
    subset = np.array([i for i, (_, r) in enumerate(pairs) if len(r) == 2])
    assert metric.corpus_value(result, subset) == sacrebleu.corpus_bleu(
        [pairs[i][0] for i in subset], _streams([pairs[i][1] for i in subset])
    ).score


def test_corpus_bleu_is_not_the_mean_of_sentence_bleu() -> None:
    pairs = _generated(seed=3, n=200, max_refs=1)
    summary = evaluate(_records(pairs), ["bleu"], bootstrap=1).summary
    per_record = [SacreBLEU(effective_order=True).sentence_score(a, r).score for a, r in pairs]
    assert summary["bleu.sentence"].aggregate == "mean"
    assert summary["bleu.sentence"].value == pytest.approx(float(np.mean(per_record)), abs=1e-9)
    assert summary["bleu"].value != pytest.approx(summary["bleu.sentence"].value, abs=0.5)


# ---- the worked examples ----------------------------------------------------------------


def test_clipping_over_generated_word() -> None:
    """BLEU-1 clips a repeated word to its count in the reference: 1/5 = 0.2."""
    scores, details = _score_one("the the the the the", ["The cat is on the mat"])
    assert details["counts"][0] == 1 and details["totals"][0] == 5
    assert details["counts"][0] / details["totals"][0] == 0.2
    assert scores["bleu.p1"] == 20.0  # sacrebleu's precisions are on 0-100
    # Lowercased, "The" counts too: the clip is the reference's count of "the", 2.
    scores, details = _score_one("the the the the the", ["The cat is on the mat"],
                                 lowercase=True)
    assert details["counts"][0] == 2 and scores["bleu.p1"] == 40.0


def test_clipping_takes_the_maximum_over_references() -> None:
    _, details = _score_one("the the the the", ["the cat", "the the dog", "a the"])
    assert details["counts"][0] == 2


def test_word_order_scores_zero_four_gram_precision() -> None:
    """Every word matches, no 4-gram does: 4-gram precision 0, BLEU 0 without smoothing."""
    scores, details = _score_one("mat the on is cat", ["the cat is on the mat"], smooth="none")
    assert details["counts"][0] == details["totals"][0] == 5
    assert details["counts"][3] == 0 and scores["bleu.p4"] == 0.0
    assert scores["bleu"] == 0.0
    assert _score_one("mat the on is cat", ["the cat is on the mat"])[0]["bleu"] > 0.0


def test_brevity_penalty_of_short_answer() -> None:
    scores, details = _score_one("the cat is", ["the cat is on the mat"])
    assert (details["sys_len"], details["ref_len"]) == (3, 6)
    assert scores["bleu.bp"] == math.exp(1 - 6 / 3)
    assert scores["bleu.ratio"] == 0.5
    # All orders the answer has (1-3) match fully: BLEU = BP * 100.
    assert scores["bleu"] == pytest.approx(100 * math.exp(-1), rel=1e-12)
    long_scores, _ = _score_one("the cat is on the mat today", ["the cat is on the mat"])
    assert long_scores["bleu.bp"] == 1.0


def test_closest_reference_length_prefers_the_shorter_on_a_tie() -> None:
    _, details = _score_one("a b c d e", ["a b c d", "a b c d e f"])
    assert details["ref_len"] == 4
    _, details = _score_one("a b c d e", ["a b", "a b c d e f g h", "a b c d e f"])
    assert details["ref_len"] == 6


def test_docstring_example() -> None:
    scores, _ = _score_one("the cat sat on the mat", ["the cat sat on a mat"])
    assert round(scores["bleu"], 2) == 53.73


# ---- edge cases -------------------------------------------------------------------------


def test_missing_answer_or_reference_is_unscored_with_a_reason() -> None:
    records = records_from_dicts([
        {"id": "ok", "answer": "the cat sat", "reference": "the cat sat"},
        {"id": "no-answer", "reference": "the cat"},
        {"id": "no-reference", "answer": "the cat"},
    ])
    results = evaluate(records, ["bleu"], bootstrap=10)
    by_id = {r.id: r for r in results.records}
    perfect = SacreBLEU(effective_order=True).sentence_score("the cat sat", ["the cat sat"]).score
    assert by_id["ok"].scores["bleu"] == perfect == pytest.approx(100.0)
    assert by_id["no-answer"].errors == {"bleu": NO_ANSWER}
    assert by_id["no-reference"].errors == {"bleu": NO_REFERENCE}
    for rid in ("no-answer", "no-reference"):
        assert all(by_id[rid].scores[f"bleu.{c}"] is None for c in COMPONENTS)
        assert by_id[rid].scores["bleu"] is None and by_id[rid].details == {}
    summary = results.summary["bleu"]
    assert (summary.n, summary.unscored) == (1, 2)
    # Corpus BLEU has no effective order (sacrebleu's default): no 4-gram at all gives 0.
    assert summary.value == sacrebleu.corpus_bleu(["the cat sat"], [["the cat sat"]]).score == 0.0
    assert summary.reasons == {NO_ANSWER: 1, NO_REFERENCE: 1}
    assert Bleu.needs == frozenset({"answer", "reference"})


@pytest.mark.parity
def test_empty_answer_and_empty_reference_as_sacrebleu() -> None:
    sentence = SacreBLEU(effective_order=True)
    for answer, refs in [("", ["the cat"]), ("the cat", [""]), ("", [""]), ("  ", ["a b"]),
                         ("the cat", ["", "the cat"])]:
        scores, details = _score_one(answer, refs)
        expected = sentence.sentence_score(answer, refs)
        assert scores["bleu"] == expected.score
        assert (scores["bleu.bp"], scores["bleu.ratio"]) == (expected.bp, expected.ratio)
        assert (details["sys_len"], details["ref_len"]) == (expected.sys_len, expected.ref_len)
    scores, _ = _score_one("", ["the cat"])
    assert (scores["bleu"], scores["bleu.bp"]) == (0.0, 0.0)
    pairs = [("", ["the cat"]), ("the cat sat on the mat", ["the cat sat on a mat"]),
             ("x", [""])]
    summary = evaluate(_records(pairs), ["bleu"], bootstrap=1).summary["bleu"]
    expected = sacrebleu.corpus_bleu([a for a, _ in pairs], _streams([r for _, r in pairs]))
    assert summary.value == expected.score and summary.n == 3


# ---- summary, bootstrap, contract -------------------------------------------------------


def test_bootstrap_ci_is_seeded_and_brackets_corpus_bleu() -> None:
    records = _records(_generated(seed=8, n=120, max_refs=2))
    first = evaluate(records, ["bleu"], seed=4, bootstrap=300).summary["bleu"]
    again = evaluate(records, ["bleu"], seed=4, bootstrap=300).summary["bleu"]
    other = evaluate(records, ["bleu"], seed=5, bootstrap=300).summary["bleu"]
    assert first.ci95 == again.ci95 and first.ci95 != other.ci95
    assert first.ci95 is not None and first.value is not None
    lo, hi = first.ci95
    assert lo < first.value < hi
    assert hi - lo < 40


def test_bootstrap_statistic_recomputes_from_statistics() -> None:
    pairs = _generated(seed=9, n=40, max_refs=1)
    metric = Bleu()
    result = metric.score(Batch(_records(pairs)))
    idx = np.random.default_rng(0).integers(0, len(pairs), size=len(pairs))
    expected = sacrebleu.corpus_bleu([pairs[i][0] for i in idx], [[pairs[i][1][0] for i in idx]])
    assert metric.corpus_value(result, idx) == expected.score


def test_output_contract(tmp_path: Path) -> None:
    pairs = _generated(seed=2, n=30, max_refs=2)
    items = [{"id": str(i), "answer": a, "reference": r} for i, (a, r) in enumerate(pairs)]
    items.append({"id": "none", "reference": "x"})
    names = ["bleu", "bleu(tokenize=intl,lowercase=true)"]
    results = evaluate(records_from_dicts(items), names, seed=1, bootstrap=100)
    results.write(tmp_path)
    canonical = ["bleu", "bleu(lowercase=true,tokenize=intl)"]
    outputs = [f"{h}{suffix}" for h in canonical for suffix in ["", *(f".{c}" for c in COMPONENTS)]]
    rows = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    for row in rows:
        assert list(row["scores"]) == outputs
        scored = row["id"] != "none"
        assert set(row["details"]) == (set(canonical) if scored else set())
        assert set(row["errors"]) == (set() if scored else set(canonical))
        for head in canonical if scored else []:
            assert row["scores"][head] == row["scores"][f"{head}.sentence"]
            assert set(row["details"][head]) == {"counts", "totals", "sys_len", "ref_len",
                                                 "nrefs", "precisions", "bp", "ratio"}
    summary = json.loads((tmp_path / "summary.json").read_text())["metrics"]
    assert list(summary) == outputs
    for head in canonical:
        assert summary[head]["aggregate"] == "corpus"
        assert all(summary[f"{head}.{c}"]["aggregate"] == "mean" for c in COMPONENTS)
        assert (summary[head]["n"], summary[head]["unscored"]) == (30, 1)
        lo, hi = summary[head]["ci95"]
        assert lo <= summary[head]["value"] <= hi
        metric = create(head)
        recomputed = metric.corpus_score([row["details"].get(head) for row in rows])
        assert recomputed.score == summary[head]["value"]
    with pytest.raises(ValueError, match="at least one"):
        create("bleu").corpus_score([None])
    # Until evaluate asks the metric for the signature of its results, nrefs is unknown ("?").
    nrefs = "var" if hasattr(Metric, "result_signature") else "?"
    assert summary["bleu"]["signature"] == (
        f"metric:bleu|nrefs:{nrefs}|case:mixed|eff:no|tok:13a|smooth:exp|sentence_eff:yes"
        f"|sacrebleu:{sacrebleu.__version__}|rageval:{rageval.__version__}"
    )
    assert "|case:lc|eff:no|tok:intl|" in summary["bleu(lowercase=true,tokenize=intl)"]["signature"]


# ---- options and signature --------------------------------------------------------------


@pytest.mark.parity
def test_signature_mirrors_sacrebleu() -> None:
    pairs = _generated(seed=4, n=20, max_refs=1)
    for params in CONFIGS:
        metric = create(_name(params))
        result = metric.score(Batch(_records(pairs)))
        mine = metric.result_signature(result).as_dict()
        sacre = SacreBLEU(**_sacre_kwargs(params))
        sacre.corpus_score([a for a, _ in pairs], [[r[0] for _, r in pairs]])
        theirs = sacre.get_signature().info
        assert {k: mine[k] for k in ("nrefs", "case", "eff", "tok", "smooth")} == {
            k: str(theirs[k]) for k in ("nrefs", "case", "eff", "tok", "smooth")}
        assert mine["sacrebleu"] == theirs["version"]
        assert list(mine)[-1] == "rageval"
    assert create("bleu").signature().format(short=True).startswith("m:bleu|#:?|c:mixed|e:no|")


def test_options_are_validated() -> None:
    assert set(SMOOTH_METHODS) == set(SacreBLEU.SMOOTH_DEFAULTS)
    with pytest.raises(UsageError, match="not a sacrebleu tokeniser"):
        create("bleu(tokenize=moses)")
    with pytest.raises(UsageError, match="smooth"):
        create("bleu(smooth=laplace)")
    with pytest.raises(UsageError, match="smooth_value applies"):
        create("bleu(smooth_value=0.2)")
    with pytest.raises(UsageError, match="at least"):
        create("bleu(smooth=floor,smooth_value=-1)")
    with pytest.raises(UsageError, match="takes no cutoff"):
        create("bleu@4")
    assert str(create("bleu(tokenize=13a,smooth=exp)").name) == "bleu"


def test_tokeniser_with_missing_extras_names_the_install() -> None:
    try:
        SacreBLEU(tokenize="ja-mecab")
    except (ImportError, RuntimeError):
        with pytest.raises(UsageError, match=r"not available: .*pip install sacrebleu\[ja\]"):
            create("bleu(tokenize=ja-mecab)")
    else:
        pytest.skip("sacrebleu's Japanese extras are installed")


def test_inputs_are_not_mutated_and_batches_agree() -> None:
    records = _records(_generated(seed=6, n=50, max_refs=3))
    before = [r.to_dict() for r in records]
    whole = evaluate(records, ["bleu"], bootstrap=1, batch_size=1000)
    pieces = evaluate(records, ["bleu"], bootstrap=1, batch_size=7)
    assert [r.to_dict() for r in records] == before
    assert [r.scores for r in whole.records] == [r.scores for r in pieces.records]
    assert whole.summary["bleu"].value == pieces.summary["bleu"].value


def test_benchmark_runs_and_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).resolve().parents[2] / "bench" / "bench_bleu.py"
    spec = importlib.util.spec_from_file_location("bench_bleu", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    assert bench.main(["--pairs", "25", "--repeats", "1", "--json", str(out)]) == 0
    assert "values agree" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["agree"] is True and len(result["median_s"]) == 5
    assert bench.generate(3, 1, 40, 80) == bench.generate(3, 1, 40, 80)
    assert all(40 <= len(a.split()) <= 80 for a, _ in bench.generate(20, 2, 40, 80))


@pytest.mark.parity
@pytest.mark.parametrize("draws", [5, 300])  # a few records, and a bootstrap-sized resample
def test_corpus_bleu_of_a_resample_is_sacrebleus(draws: int) -> None:
    """Either way of summing a resample (gathering its rows, or counting draws when the
    resample is long) gives sacrebleu's corpus BLEU of the resampled segments, exactly."""
    rng = random.Random(draws)
    words = [f"w{i}" for i in range(12)]
    pairs = [(" ".join(rng.choices(words, k=rng.randint(1, 9))),
              " ".join(rng.choices(words, k=rng.randint(1, 9)))) for _ in range(60)]
    records = records_from_dicts([{"id": str(i), "answer": a, "reference": r}
                                  for i, (a, r) in enumerate(pairs)])
    metric = create("bleu")
    result = metric.score(Batch(records))
    picks = np.array([rng.randrange(len(pairs)) for _ in range(draws)])
    expected = sacrebleu.corpus_bleu([pairs[i][0] for i in picks],
                                     [[pairs[i][1] for i in picks]]).score
    assert metric.corpus_value(result, picks) == expected
