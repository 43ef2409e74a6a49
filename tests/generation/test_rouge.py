"""ROUGE: bit-for-bit parity with rouge-score, the output contract, the unicode tokenizer."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

import rageval.generation.rouge as rouge
from rageval.api import evaluate
from rageval.core.errors import UsageError
from rageval.core.metric import NO_ANSWER, NO_REFERENCE, Batch
from rageval.core.records import Record, records_from_dicts
from rageval.core.registry import create
from rageval.core.version import __version__
from rageval.generation.rouge.lcs import _lcs_length, _position_masks
from rageval.generation.rouge.tokenization import _tokens

TYPES = ("rouge1", "rouge2", "rouge3", "rougeL", "rougeLsum")
PARTS = ("precision", "recall", "fmeasure")

_VOCAB = [
    "the", "a", "of", "and", "to", "in", "is", "was", "revenue", "revenues", "grew", "growing",
    "growth", "company", "companies", "market", "markets", "quarter", "quarterly", "reported",
    "reporting", "cloud", "services", "service", "customers", "customer", "increased",
    "increase", "operating", "income", "margin", "margins", "data", "model", "models",
    "trained", "training", "running", "runs", "ran", "happily", "happiness", "generalization",
    "generalizations",
]
_ODD = ["café", "naïve", "Ünïcödé", "中文", "東京", "Москва", "İstanbul", "straße", "K", "x_y",
        "e-mail", "don't", "3.5%", "2024", "U.S.", "ﬁnance", "１２３"]
_SEPARATORS = [" "] * 12 + [", ", ". ", "; ", "\n", "\n\n", " - ", "! ", "\t", "  "]


def _text(rng: random.Random, words: int) -> str:
    out = []
    for _ in range(words):
        word = rng.choice(_ODD) if rng.random() < 0.05 else rng.choice(_VOCAB)
        out.append(word.capitalize() if rng.random() < 0.1 else word)
        out.append(rng.choice(_SEPARATORS))
    return "".join(out).strip(" ")


def _reference_for(rng: random.Random, answer: str) -> str:
    words = answer.split(" ")
    kept = [w for w in words if rng.random() > 0.2]
    kept = [rng.choice(_VOCAB) if rng.random() < 0.2 else w for w in kept]
    if rng.random() < 0.3:
        cut = len(kept) // 2
        kept = kept[cut:] + kept[:cut]
    return " ".join(kept) + (" " + _text(rng, rng.randint(0, 20)) if rng.random() < 0.5 else "")


def generated_pairs(count: int, seed: int) -> list[tuple[list[str], str]]:
    """(references, answer): answer-like texts of 5-80 words, 1-3 references each."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        answer = _text(rng, rng.randint(5, 80))
        refs = [_reference_for(rng, answer) if rng.random() < 0.8 else _text(rng, 30)
                for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        out.append((refs, answer))
    return out


def _expected(scorer: rouge_scorer.RougeScorer, refs: list[str], answer: str) -> dict:
    if len(refs) == 1:
        return scorer.score(refs[0], answer)
    return scorer.score_multi(refs, answer)


def assert_parity(pairs: list[tuple[list[str], str]], stem: bool,
                  types: tuple[str, ...] = TYPES) -> None:
    """Every pair, every type: rageval's precision, recall and fmeasure == rouge-score's."""
    records = [Record(id=str(i), answer=a, references=tuple(r)) for i, (r, a) in enumerate(pairs)]
    batch = Batch(records)
    flag = "true" if stem else "false"
    got = {t: create(f"{t}(stem={flag})").score(batch) for t in types}
    scorer = rouge_scorer.RougeScorer(list(types), use_stemmer=stem)
    for i, (refs, answer) in enumerate(pairs):
        expected = _expected(scorer, refs, answer)
        for t in types:
            values = got[t].values
            name = next(iter(values))
            ours = tuple(float(values[f"{name}.{part}"][i]) for part in PARTS)
            theirs = tuple(getattr(expected[t], part) for part in PARTS)
            assert ours == theirs, (t, stem, refs, answer, ours, theirs)
            assert values[name][i] == theirs[2]  # the headline is the F-measure


# --------------------------------------------------------------------------------------------
# Parity with rouge-score
# --------------------------------------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("stem", [False, True])
def test_parity_on_generated_answer_like_pairs(stem: bool) -> None:
    assert_parity(generated_pairs(300, seed=7), stem)


EDGE_TEXTS = [
    "",
    " ",
    "!!! ... ???",
    "\n\n\n",
    "word",
    "Word.",
    "the the the the the",
    "the the cat the the",
    "café naïve résumé Ünïcödé",
    "cafe naive resume",
    "中文文本测试",
    "the 中文 cat 東京 sat",
    "Привет мир",
    "İstanbul K ß ﬁnance １２３",
    "don't stop-believing x_y U.S.A. 3.5% 2024",
    "The cat sat on the mat.",
    "the cat sat on the mat",
    "on the mat the cat sat",
    "The cat sat.\nOn the mat.",
    "on the mat\nthe cat sat",
    "the cat\n\n\nsat on\n\nthe mat\n",
    "a b c\r\nd e f\r\n",
    "\nleading and trailing newlines\n",
    "running runs ran runner happily happiness generalizations",
    "run run ran happi happy general",
    "1 2 3 4 5 6 7 8 9 10",
    "line one\n \nline three",
]


@pytest.mark.parity
@pytest.mark.parametrize("stem", [False, True])
def test_parity_on_edge_cases_every_pair(stem: bool) -> None:
    pairs = [([ref], answer) for ref in EDGE_TEXTS for answer in EDGE_TEXTS]
    assert_parity(pairs, stem)


@pytest.mark.parity
def test_parity_on_very_long_texts() -> None:
    rng = random.Random(3)
    answer = _text(rng, 900)
    reference = _reference_for(rng, answer)
    assert_parity([([reference], answer), ([answer], answer)], stem=False,
                  types=("rouge1", "rouge2", "rougeL", "rougeLsum"))


def test_identical_texts_score_one() -> None:
    text = "The cat sat on the mat.\nThen it slept."
    for t in TYPES:
        assert _scores([{"id": "a", "answer": text, "reference": text}], t)[0] == 1.0


@pytest.mark.parity
def test_multiple_references_ties_pick_the_first() -> None:
    answer = "a b c d"
    short, long = "a b", "a b c d e f g h"  # P=0.5,R=1 and P=1,R=0.5: the same F-measure
    scorer = rouge_scorer.RougeScorer(["rouge1"])
    assert scorer.score(short, answer)["rouge1"].fmeasure == scorer.score(long, answer)[
        "rouge1"].fmeasure
    for refs in ([short, long], [long, short]):
        assert_parity([(refs, answer)], stem=False)
        first = scorer.score(refs[0], answer)["rouge1"]
        got = _all_parts([{"id": "x", "answer": answer, "reference": refs}], "rouge1")
        assert got == (first.fmeasure, first.precision, first.recall, first.fmeasure)


@pytest.mark.parity
def test_multiple_references_each_metric_picks_its_own_best() -> None:
    answer = "the cat sat on the mat"
    refs = ["mat the on sat cat the", "the cat sat and lay on a mat"]
    assert_parity([(refs, answer)], stem=False)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2"])
    by_ref = [scorer.score(r, answer) for r in refs]
    assert by_ref[0]["rouge1"].fmeasure > by_ref[1]["rouge1"].fmeasure
    assert by_ref[1]["rouge2"].fmeasure > by_ref[0]["rouge2"].fmeasure


_SHORT_WORDS = ["the", "cat", "cats", "sat", "running", "ran", "mat", "on", "a", "é", "naïve",
                "中", "文", "Кот", "don't", "x_y", "42", ",", ".", "!", "-", "\n", "  ", "\t"]


@st.composite
def short_text(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(_SHORT_WORDS), max_size=14))
    return draw(st.sampled_from([" ", ""])).join(words)


@pytest.mark.parity
@settings(max_examples=150, deadline=None)
@given(st.lists(short_text(), min_size=1, max_size=3), short_text(), st.booleans())
def test_property_parity_on_random_short_texts(refs: list[str], answer: str, stem: bool) -> None:
    assert_parity([(refs, answer)], stem)


@pytest.mark.parity
def test_parity_when_ngram_keys_must_be_renumbered(monkeypatch: pytest.MonkeyPatch) -> None:
    # A tiny key budget forces the dense renumbering paths that only gigantic batches take.
    monkeypatch.setattr("rageval.generation.rouge.ngrams._KEY_LIMIT", 1 << 20)
    assert_parity(generated_pairs(60, seed=13), stem=False, types=("rouge1", "rouge2", "rouge4"))


# --------------------------------------------------------------------------------------------
# rougeN beyond rouge-score's rouge9, and the examples of the metric cards
# --------------------------------------------------------------------------------------------


def _naive_rouge_n(reference: str, answer: str, n: int) -> tuple[float, float, float]:
    def grams(text: str) -> Counter:
        tokens = rouge.tokenize(text)
        return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))

    ref, ans = grams(reference), grams(answer)
    matches = sum((ref & ans).values())
    p = matches / max(sum(ans.values()), 1)
    r = matches / max(sum(ref.values()), 1)
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def test_rouge_n_for_large_n_follows_the_same_definition() -> None:
    pairs = generated_pairs(40, seed=11)
    items = [{"id": str(i), "answer": a, "reference": r[0]} for i, (r, a) in enumerate(pairs)]
    for n in (10, 12):
        got = _components(items, f"rouge{n}")
        for item, row in zip(items, got, strict=True):
            assert row == _naive_rouge_n(item["reference"], item["answer"], n)


@pytest.mark.parametrize(
    ("metric", "reference", "answer", "value"),
    [
        ("rouge1", "the cat sat on the mat", "the cat lay on the mat", 5 / 6),
        ("rouge2", "the cat sat on the mat", "the cat lay on the mat", 0.6),
        ("rougeL", "the cat sat on the mat", "on the mat the cat sat", 0.5),
        ("rougeLsum", "the cat sat\non the mat", "on the mat\nthe cat sat", 1.0),
        ("rougeL", "the cat sat\non the mat", "on the mat\nthe cat sat", 0.5),
    ],
)
def test_card_examples(metric: str, reference: str, answer: str, value: float) -> None:
    got = _scores([{"id": "x", "answer": answer, "reference": reference}], metric)[0]
    assert got is not None and math.isclose(got, value)


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


@pytest.mark.parity
def test_default_tokenizer_matches_rouge_score() -> None:
    from rouge_score import tokenizers

    for stem in (False, True):
        theirs = tokenizers.DefaultTokenizer(use_stemmer=stem)
        for text in EDGE_TEXTS:
            assert rouge.tokenize(text, stem=stem) == theirs.tokenize(text)


@pytest.mark.parametrize("text", ["中文文本测试", "Привет, как дела?", "東京は日本の首都です",
                                  "Η Αθήνα", "हिन्दी भाषा"])
def test_unicode_tokenizer_scores_non_latin_text_against_itself_as_one(text: str) -> None:
    item = [{"id": "x", "answer": text, "reference": text}]
    for t in ("rouge1", "rouge2", "rougeL", "rougeLsum"):
        # The default tokenizer (rouge-score's) keeps ASCII letters and digits only: no tokens.
        assert _scores(item, t) == [0.0]
        assert _scores(item, f"{t}(tokenizer=unicode)") == [1.0]


def test_unicode_tokenizer_tokens() -> None:
    assert rouge.tokenize("Привет, МИР!", "unicode") == ["привет", "мир"]
    assert rouge.tokenize("东京 Tower", "unicode") == ["东", "京", "tower"]
    assert rouge.tokenize("ひらがな", "unicode") == ["ひ", "ら", "が", "な"]
    # NFKC: full-width forms and composed/decomposed accents compare equal.
    assert rouge.tokenize("ＡＢＣ１２３ cafe\u0301", "unicode") == ["abc123", "café"]
    assert rouge.tokenize("हिन्दी", "unicode") == ["हिन्दी"]  # combining vowel signs stay
    assert rouge.tokenize("x_y", "unicode") == ["x", "y"]
    assert rouge.tokenize("the running cats", "unicode", stem=True) == ["the", "run", "cat"]
    assert rouge.tokenize("кошки running", "unicode", stem=True) == ["кошки", "run"]
    with pytest.raises(ValueError, match="unknown tokenizer"):
        rouge.tokenize("x", "bogus")


def test_unicode_tokenizer_partial_overlap() -> None:
    item = [{"id": "x", "answer": "我喜欢猫", "reference": "我喜欢狗"}]
    assert _scores(item, "rouge1(tokenizer=unicode)") == [0.75]
    assert _scores(item, "rouge1") == [0.0]


# --------------------------------------------------------------------------------------------
# Names, signatures, the output contract
# --------------------------------------------------------------------------------------------


def test_names_classes_and_outputs() -> None:
    assert type(create("rouge3")) is type(create("rouge3"))
    assert type(create("rouge1")) is rouge.Rouge1
    assert rouge.rouge_n_class("rouge2") is rouge.Rouge2
    assert str(create("rougeL(stem=true)")) == "rougeL(stem=true)"
    assert str(create("rouge2(stem=false,tokenizer=default)")) == "rouge2"
    assert str(create("ROUGEL")) == "rougeL"
    assert create("rouge2").output_names() == [
        "rouge2", "rouge2.precision", "rouge2.recall", "rouge2.fmeasure"]
    assert create("rouge2") == create("rouge2(stem=false)")
    for bad in ("rouge0", "rouge2(tokenizer=bogus)", "rouge2(stem=maybe)", "rougeL@5",
                "rouge2(n=3)"):
        with pytest.raises(UsageError):
            create(bad)


def test_signatures() -> None:
    sig = create("rouge2").signature()
    assert sig.format() == ("metric:rouge2|variant:n2|stem:false|tokenizer:default|"
                            f"rouge-score:0.1.2|rageval:{__version__}")
    assert sig.format(short=True).startswith("m:rouge2|var:n2|stem:false|tok:default|rs:0.1.2")
    assert create("rougeL").signature().get("variant") == "lcs"
    assert create("rougeLsum").signature().get("variant") == "lcs-summary"
    stemmed = create("rougeL(stem=true,tokenizer=unicode)").signature()
    assert [f.key for f in stemmed.fields] == [
        "metric", "variant", "stem", "tokenizer", "rouge-score", "nltk", "unicode", "rageval"]
    assert create("rouge2").signature() != create("rouge2(stem=true)").signature()


def test_evaluate_output_contract() -> None:
    items = [
        {"id": "full", "answer": "The cat sat on the mat.", "reference": "A cat sat on a mat."},
        {"id": "multi", "answer": "revenue grew fast",
         "reference": ["sales fell", "revenue grew fast"]},
        {"id": "noref", "answer": "an answer without reference"},
        {"id": "noanswer", "reference": "a reference without answer"},
        {"id": "empty", "answer": "", "reference": "something"},
    ]
    metrics = ["rouge2", "rougeL(stem=true)", "rougeLsum", "rouge3"]
    results = evaluate(records_from_dicts(items), metrics, bootstrap=10)
    rows = {r.id: r for r in results.records}
    for metric in metrics:
        for part in ("", ".precision", ".recall", ".fmeasure"):
            assert f"{metric}{part}" in rows["full"].scores
        assert rows["full"].scores[metric] == rows["full"].scores[f"{metric}.fmeasure"]
        assert rows["multi"].scores[metric] == 1.0
        assert rows["empty"].scores[metric] == 0.0  # an empty answer scores 0, as rouge-score
        assert rows["noref"].scores[metric] is None
        assert rows["noanswer"].scores[f"{metric}.recall"] is None
        assert rows["noref"].errors[metric] == NO_REFERENCE
        assert rows["noanswer"].errors[metric] == NO_ANSWER
        assert metric not in rows["full"].errors
        summary = results.summary[metric]
        assert (summary.n, summary.unscored) == (3, 2)
        assert summary.signature == create(metric).signature().format()
    scorer = rouge_scorer.RougeScorer(["rouge2"])
    assert rows["full"].scores["rouge2.precision"] == scorer.score(
        items[0]["reference"], items[0]["answer"])["rouge2"].precision


def test_a_run_where_no_record_has_a_reference_stops_before_scoring() -> None:
    with pytest.raises(UsageError, match="needs 'reference'"):
        evaluate(records_from_dicts([{"id": "a", "answer": "x"}]), ["rougeL"], bootstrap=1)


def test_tokens_are_shared_by_the_metrics_of_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Counter()
    original = _tokens

    def counting(text: str, tokenizer: str, stem: bool):
        calls[text] += 1
        return original(text, tokenizer, stem)

    monkeypatch.setattr("rageval.generation.rouge.pairs._tokens", counting)
    records = [Record(id="a", answer="one two three", references=("one two", "two three")),
               Record(id="b", answer="one two three", references=("one two",))]
    batch = Batch(records)
    for name in ("rouge1", "rouge2", "rougeL", "rouge4"):
        create(name).score(batch)
    assert calls == {"one two three": 1, "one two": 1, "two three": 1}
    create("rouge1(stem=true)").score(batch)  # other options tokenise anew
    assert calls["one two three"] == 2


def test_metrics_leave_records_alone_and_agree_across_batch_sizes() -> None:
    pairs = generated_pairs(30, seed=5)
    records = [Record(id=str(i), answer=a, references=tuple(r)) for i, (r, a) in enumerate(pairs)]
    records += [Record(id="noref", answer="x y z"), Record(id="noanswer", references=("x",)),
                Record(id="empty", answer="", references=("",))]
    before = [r.to_dict() for r in records]
    metrics = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    whole = evaluate(records, metrics, bootstrap=1)
    assert [r.to_dict() for r in records] == before
    for batch_size in (1, 7):
        split = evaluate(records, metrics, bootstrap=1, batch_size=batch_size)
        for a, b in zip(whole.records, split.records, strict=True):
            assert a.scores == b.scores and a.errors == b.errors


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _scores(items: list[dict], metric: str) -> list[float | None]:
    results = evaluate(records_from_dicts(items), [metric], bootstrap=1)
    name = str(create(metric))
    return [r.scores[name] for r in results.records]


def _all_parts(items: list[dict], metric: str) -> tuple[float | None, ...]:
    results = evaluate(records_from_dicts(items), [metric], bootstrap=1)
    name = str(create(metric))
    row = results.records[0].scores
    return tuple(row[name + part] for part in ("", ".precision", ".recall", ".fmeasure"))


def _components(items: list[dict], metric: str) -> list[tuple[float, float, float]]:
    records = records_from_dicts(items)
    values = create(metric).score(Batch(records)).values
    return [tuple(float(values[f"{metric}.{part}"][i]) for part in PARTS)
            for i in range(len(records))]


def test_best_reference_helper() -> None:
    f = np.array([0.5, 0.7, 0.7, 0.2, 0.1])
    record = np.array([0, 0, 0, 2, 2])
    assert rouge.best_reference(f, record, 3).tolist() == [1, -1, 3]


def test_benchmark_runs_and_agrees_on_a_few_pairs() -> None:
    """Keeps bench/bench_rouge.py from rotting (a tiny run, no timing)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "bench_rouge.py"
    spec = importlib.util.spec_from_file_location("bench_rouge", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    pairs = bench.generate_pairs(40, seed=1)
    assert all(40 <= len(answer.split()) <= 100 for _, answer in pairs)
    for stem in (False, True):
        assert bench.run_rageval(pairs, stem) == bench.run_rouge_score(pairs, stem)


def _table_lcs(a: list[int], b: list[int]) -> int:
    """The textbook quadratic table, as rouge-score fills it."""
    row = [0] * (len(b) + 1)
    for x in a:
        prev_diag, row[0] = 0, 0
        for j, y in enumerate(b, 1):
            prev_diag, row[j] = row[j], (prev_diag + 1 if x == y
                                         else max(row[j], row[j - 1]))
    return row[-1]


def test_lcs_lengths_batched_across_word_boundaries_equal_the_table() -> None:
    """Answers on and around each 64-token word boundary (carries cross words), past the
    widest batched answer and the longest batched reference, and empty texts: the batched
    recurrence gives the table's lengths, as the per-pair one does for the widest."""
    rng = random.Random(11)
    widths = [0, 1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 257, 300]
    records = []
    for i in range(120):
        vocab = rng.choice([2, 3, 8, 40])
        answer = " ".join(f"w{rng.randrange(vocab)}" for _ in range(rng.choice(widths)))
        ref_len = rng.choice([0, 1, 5, 70, 200]) if i % 30 else 1100
        reference = " ".join(f"w{rng.randrange(vocab)}" for _ in range(ref_len))
        records.append(Record(id=str(i), answer=answer, references=(reference,)))
    pairs = rouge.batch_pairs(Batch(records), "default", False)
    lcs, ref_len, ans_len = rouge.lcs_lengths(pairs)
    texts = pairs.texts
    for k, (t, a) in enumerate(zip(pairs.target.tolist(), pairs.prediction.tolist(),
                                   strict=True)):
        assert (ref_len[k], ans_len[k]) == (len(texts[t]), len(texts[a]))
        if len(texts[t]) * len(texts[a]) <= 100_000:
            assert lcs[k] == _table_lcs(texts[t], texts[a]), k
        else:
            masks = _position_masks(texts[a])
            assert lcs[k] == _lcs_length(texts[t], masks, len(texts[a])), k
