"""BERTScore's device-resident path (the one a GPU takes) gives the host path's values: run here
on the CPU, where it is forced, on the default model's embeddings and on edge cases; the test
that needs CUDA says so when it is skipped."""

from __future__ import annotations

import os
import random
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here runs offline
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

pytest.importorskip("bert_score")
torch = pytest.importorskip("torch")

import rageval.generation.bertscore as bs  # noqa: E402
import rageval.generation.bertscore.resident as resident_module  # noqa: E402
from rageval.api import evaluate  # noqa: E402
from rageval.core.errors import UsageError  # noqa: E402
from rageval.core.records import Record  # noqa: E402
from rageval.generation.bertscore.disk_cache import _disk_cache  # noqa: E402
from rageval.generation.bertscore.embeddings import _embeddings  # noqa: E402
from rageval.generation.bertscore.engine import _engine  # noqa: E402
from rageval.generation.bertscore.entries import _Entry  # noqa: E402
from rageval.generation.bertscore.matching import _match  # noqa: E402
from rageval.generation.bertscore.resident import (  # noqa: E402
    _embed_on_device,
    _gather,
    _match_resident,
    _resident_embeddings,
    _token_rows,
    _use_resident,
)
from rageval.generation.bertscore.weights import _special_token_weights  # noqa: E402

EXACT = 1e-9  # the same arithmetic on the same device: float64 rounding only
_PROSE = ("revenue grew in the third quarter because demand for cloud services rose while "
          "margins narrowed on higher energy costs and the board approved a buyback")
_WORDS = _PROSE.split()


def _texts(count: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 60)))
            for _ in range(count)]


# Edge cases: an empty text ([CLS] [SEP], exactly two tokens), one word (three tokens), a text
# truncated to the model's 512 tokens, and texts of many lengths.
_LONG = " ".join(random.Random(1).choice(_WORDS) for _ in range(700))
_EDGE = ["", "yes", _LONG, *_texts(30)]


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(bs.CACHE_ENV, str(tmp_path / "cache"))
    bs.clear_memory_cache()
    yield
    bs.clear_memory_cache()


def _pairs(texts: list[str]) -> list[tuple[str, str]]:
    rng = random.Random(2)
    pairs = [(a, b) for a in texts[:4] for b in texts[:4]]  # every edge case with every other
    return pairs + [(rng.choice(texts), rng.choice(texts)) for _ in range(60)]


def _idf(entries: dict[str, _Entry]) -> dict[str, np.ndarray]:
    """idf-like weights: positive and uneven (the special tokens' too), as with idf=true."""
    rng = np.random.default_rng(0)
    table = rng.uniform(0.1, 3.0, 40_000)
    return {text: table[entry.ids] for text, entry in entries.items()}


def test_only_cuda_takes_the_resident_path() -> None:
    assert not _use_resident("cpu")
    assert _use_resident("cuda") and _use_resident("cuda:1")
    assert not _use_resident("mps")  # no float64 there: the host path weighs on the host
    assert not _use_resident("gpu") and not _use_resident("cuda:x")  # left to model loading


def test_a_device_torch_cannot_read_is_a_clear_error() -> None:
    records = [Record(id="1", answer="a cat", references=("a cat",))]
    with pytest.raises(UsageError, match="device=gpu is not usable"):
        evaluate(records, [bs.BertScore(device="gpu", cache="none")])


def test_a_step_too_large_for_the_device_takes_the_host_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Embeddings past the device's free memory: computed and matched as on the host path,
    stored in the caches as usual, with the same values."""
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    bs.clear_memory_cache()
    monkeypatch.setattr("rageval.generation.bertscore.resident._fits_on_device",
                        lambda device, tokens, dim: False)
    entries, resident = _resident_embeddings(engine, _EDGE, None, "cpu", 16)
    assert resident is None
    bs.clear_memory_cache()
    host = _embeddings(engine, _EDGE, None, "cpu", 16)
    for text in _EDGE:
        assert np.array_equal(entries[text].ids, host[text].ids)
        assert (entries[text].emb is None) == (host[text].emb is None)
        if host[text].emb is not None:
            assert np.array_equal(entries[text].emb, host[text].emb)


def test_copies_to_a_separate_host_memory_equal_the_device_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The branch a GPU takes (device and host apart): each text's host copy, cut from the
    buffer the passes copy into, equals its rows on the device and the host path's array."""
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    original = resident_module._HostCopies.__init__

    def apart(self, torch_module, device):  # type: ignore[no-untyped-def]
        original(self, torch_module, device)
        self.same_memory = False

    monkeypatch.setattr(resident_module._HostCopies, "__init__", apart)
    encoded = engine.encode(list(_EDGE))
    ids = [tokens for tokens, _ in encoded if len(tokens)]
    flat, host = resident_module._embed_on_device(engine, ids, "cpu", 3)
    expected = engine.embed(ids, "cpu", 3)
    start = 0
    for copy, want in zip(host, expected, strict=True):
        assert np.array_equal(copy, want)
        assert np.array_equal(flat[start: start + len(copy)].numpy(), want)
        start += len(copy)


def test_token_rows_map_a_padded_pass_to_each_texts_offset() -> None:
    source, target = _token_rows(np.array([3, 1, 2]), np.array([5, 0, 1]), width=4)
    assert source.tolist() == [0, 1, 2, 4, 8, 9]  # row r's tokens start at r * width
    assert target.tolist() == [5, 6, 7, 0, 1, 2]


def test_embedding_on_the_device_gives_the_forward_passes_values() -> None:
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    ids = [ids for ids, _ in engine.encode(_EDGE)]
    host = engine.embed(ids, "cpu", 8)
    flat, copies = _embed_on_device(engine, ids, "cpu", 8)
    assert flat.shape == (sum(len(t) for t in ids), host[0].shape[1])
    start = 0
    for k, expected in enumerate(host):
        assert np.array_equal(copies[k], expected)
        assert np.array_equal(flat[start: start + len(expected)].numpy(), expected)
        start += len(expected)


@pytest.mark.parametrize("idf", [False, True])
def test_resident_matching_equals_the_host_matching(idf: bool) -> None:
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    entries = _embeddings(engine, _EDGE, None, "cpu", 16)
    assert [len(entries[t].ids) for t in _EDGE[:3]] == [2, 3, 512]
    assert entries[_LONG].truncated
    plain = _special_token_weights(engine)
    weights = _idf(entries) if idf else {t: plain(e.ids) for t, e in entries.items()}
    half = len(_EDGE) // 2  # some texts as if from a cache, the others as if just computed
    computed = torch.from_numpy(np.concatenate([entries[t].emb for t in _EDGE[half:]]))
    resident = _gather(entries, _EDGE[:half], _EDGE[half:], computed, "cpu")
    pairs = _pairs(_EDGE)
    expected = _match(entries, weights, pairs, "cpu")
    got = _match_resident(resident, weights, pairs)
    assert np.abs(got - expected).max() <= EXACT
    empty = [k for k, pair in enumerate(pairs) if "" in pair]
    assert np.array_equal(got[empty, :2], np.zeros((len(empty), 2)))  # an empty text: P, R 0
    assert (np.delete(got, empty, axis=0) > 0).all()


def test_resident_matching_equals_the_host_matching_on_edge_weights() -> None:
    """Negative similarities (counted 0), weights that sum to 0 (NaN, as the host path, which
    the metric reports as undefined) and texts without any token (0)."""
    rng = np.random.default_rng(3)
    entries: dict[str, _Entry] = {}
    for k, n in enumerate([2, 3, 5, 9, 17, 33, 4, 6]):
        emb = rng.standard_normal((n, 8)).astype(np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        entries[f"t{k}"] = _Entry(np.arange(n, dtype=np.int64), emb, n)
    entries["none"] = _Entry(np.empty(0, dtype=np.int64), None, 0)
    weights = {t: rng.uniform(0.0, 2.0, len(e.ids)) for t, e in entries.items()}
    weights["t6"] = np.zeros(4)  # no weight at all
    texts = [t for t in entries if t != "none"]
    resident = _gather(entries, texts, [], None, "cpu")
    pairs = [(a, b) for a in entries for b in entries]
    expected = _match(entries, weights, pairs, "cpu")
    got = _match_resident(resident, weights, pairs)
    assert np.array_equal(np.isnan(got), np.isnan(expected)) and np.isnan(got).any()
    assert np.nanmax(np.abs(got - expected)) <= EXACT
    none = [k for k, pair in enumerate(pairs) if "none" in pair]
    assert np.array_equal(got[none], np.zeros((len(none), 3)))


def test_resident_embeddings_fill_the_caches_as_the_host_path(tmp_path: Path) -> None:
    """The host copies the resident path stores are the embeddings: a later run on the host
    path reads them all back from disk and scores the same."""
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    host = _embeddings(engine, _EDGE, None, "cpu", 16)
    bs.clear_memory_cache()
    disk = _disk_cache(str(tmp_path / "packs"))
    got, resident = _resident_embeddings(engine, _EDGE, disk, "cpu", 16)
    for text in _EDGE:
        assert np.array_equal(got[text].ids, host[text].ids)
        assert np.array_equal(got[text].emb, host[text].emb)
        start, count = resident.rows[text]
        assert np.array_equal(resident.flat[start: start + count].numpy(), host[text].emb)
    bs.clear_memory_cache()
    bs.reset_cache_stats()
    again = _embeddings(engine, _EDGE, disk, "cpu", 16)
    assert bs.cache_stats()["disk_hits"] == len(_EDGE)
    assert all(np.array_equal(again[t].emb, host[t].emb) for t in _EDGE)


@pytest.mark.parametrize("idf", [False, True])
def test_the_metric_scores_the_same_on_either_path(idf: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Through evaluate, in two windows (so the second finds some texts in memory)."""
    texts = _EDGE
    records = [Record(id=str(k), answer=texts[k % len(texts)],
                      references=tuple(texts[(k * 7 + j) % len(texts)] for j in range(1 + k % 2)))
               for k in range(40)]
    values = {}
    for resident in (False, True):
        monkeypatch.setattr("rageval.generation.bertscore.metric._use_resident",
                            lambda device, on=resident: on)
        bs.clear_memory_cache()
        metric = bs.BertScore(idf=idf, device="cpu", cache="none")
        results = evaluate(records, [metric], batch_size=16)
        values[resident] = np.array([[r.scores.get(f"{metric.name}.{p}", np.nan)
                                      for p in ("precision", "recall", "f1")]
                                     for r in results.records])
    assert np.array_equal(np.isnan(values[True]), np.isnan(values[False]))
    assert np.nanmax(np.abs(values[True] - values[False])) <= EXACT


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="needs a CUDA GPU: torch sees none (the device-resident path is "
                           "tested on the CPU above)")
def test_on_cuda_the_values_are_the_cpus() -> None:
    """On a GPU: the embeddings stay there, the host copies equal them, and the scores agree
    with the CPU's within bert-score's tolerance (kernels differ: float32 rounding)."""
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    entries, resident = _resident_embeddings(engine, _EDGE, None, "cuda", 16)
    assert resident.flat.device.type == "cuda"
    for text in _EDGE:
        start, count = resident.rows[text]
        assert np.array_equal(resident.flat[start: start + count].cpu().numpy(),
                              entries[text].emb)
    plain = _special_token_weights(engine)
    weights = {t: plain(e.ids) for t, e in entries.items()}
    pairs = _pairs(_EDGE)
    got = _match_resident(resident, weights, pairs)
    bs.clear_memory_cache()
    on_cpu = _embeddings(engine, _EDGE, None, "cpu", 16)
    assert np.abs(got - _match(on_cpu, weights, pairs, "cpu")).max() < 1e-6


def test_a_step_whose_texts_are_all_cached_loads_no_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every text already embedded: the step's width comes from the cached embeddings, and the
    model is not loaded to read it."""
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    first, _ = _resident_embeddings(engine, _EDGE, None, "cpu", 16)

    def no_model(device: str) -> None:
        raise AssertionError("the model was loaded for a step with nothing to embed")

    monkeypatch.setattr(engine, "model", no_model)
    again, _ = _resident_embeddings(engine, _EDGE, None, "cpu", 16)
    for text in _EDGE:
        assert (again[text].emb is None) == (first[text].emb is None)
        if first[text].emb is not None:
            assert np.array_equal(again[text].emb, first[text].emb)
