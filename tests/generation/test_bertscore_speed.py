"""BERTScore's fast paths give the values of the plain ones: length-bucketed batches against
one text per forward pass, oneDNN linear layers against torch's, and the fallback to torch's
layers when the fast ones would not reproduce them."""

from __future__ import annotations

import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here runs offline
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

pytest.importorskip("bert_score")
torch = pytest.importorskip("torch")

import rageval.generation.bertscore as bs  # noqa: E402
from rageval.core.metric import Batch  # noqa: E402
from rageval.core.records import Record  # noqa: E402
from rageval.core.registry import create  # noqa: E402
from rageval.generation.bertscore import cpu_layers  # noqa: E402
from rageval.generation.bertscore.dependencies import _bert_score_utils  # noqa: E402
from rageval.generation.bertscore.engine import _engine, _length_batches  # noqa: E402
from rageval.generation.bertscore.models import _model_spec  # noqa: E402

_PROSE = ("revenue grew in the third quarter because demand for cloud services rose while "
          "margins narrowed on higher energy costs and the board approved a buyback")
_WORDS = _PROSE.split()


def _texts(count: int, seed: int = 3) -> list[str]:
    """Texts of 1 to 120 words: widely different token counts, so buckets matter."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 120)))
            for _ in range(count)]


def _stock_model():
    """The default model as bert-score loads it, with torch's own layers."""
    model = _bert_score_utils().get_model(_model_spec(bs.DEFAULT_MODEL).source,
                                          bs.DEFAULT_LAYER, False)
    return model.eval()


def _forward(model, ids: list[np.ndarray]) -> list[np.ndarray]:
    """Each text alone (no padding), normalised as the engine does."""
    out = []
    with torch.inference_mode():
        for row in ids:
            hidden = model(torch.from_numpy(row)[None])[0][0]
            out.append((hidden / torch.norm(hidden, dim=-1).unsqueeze(-1)).numpy())
    return out


@pytest.fixture(autouse=True)
def _fresh_engines():
    bs.unload_models()
    bs.clear_memory_cache()
    yield
    bs.unload_models()
    bs.clear_memory_cache()


def test_length_batches_cover_every_text_once_and_pad_little() -> None:
    rng = random.Random(0)
    lengths = [rng.choice([2, 3, 40, 41, 90, 300, 512]) for _ in range(500)]
    batches = _length_batches(lengths, 16)
    assert sorted(k for batch in batches for k in batch) == list(range(500))
    for batch in batches:
        widths = [lengths[k] for k in batch]
        assert len(batch) <= 16 and widths == sorted(widths, reverse=True)
        assert 2 * widths[-1] >= widths[0]  # no text under half its batch's width
        assert len(batch) == 1 or len(batch) * widths[0] <= 16 * 128
    assert [lengths[b[0]] for b in batches] == sorted((lengths[b[0]] for b in batches),
                                                      reverse=True)


def test_bucketed_batches_embed_as_one_text_per_pass() -> None:
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    ids = [row for row, _ in engine.encode(_texts(40))]
    batched = engine.embed(ids, "cpu", 64)
    alone = engine.embed(ids, "cpu", 1)
    assert [a.shape for a in batched] == [(len(row), 384) for row in ids]
    assert max(float(np.abs(a - b).max()) for a, b in zip(batched, alone, strict=True)) < 1e-5


def test_scores_do_not_depend_on_the_batch_size() -> None:
    texts = _texts(30)
    records = [Record(id=str(i), answer=texts[i], references=(texts[i + 15],))
               for i in range(15)]

    def scores(batch_size: int) -> np.ndarray:
        bs.unload_models()
        bs.clear_memory_cache()
        metric = create(f"bertscore(batch_size={batch_size},cache=none,device=cpu)")
        result = metric.score(Batch(records))
        return np.stack([result.values[f"bertscore.{p}"] for p in ("precision", "recall",
                                                                     "f1")], axis=1)

    assert np.abs(scores(64) - scores(1)).max() < 1e-6


def test_cpu_model_runs_onednn_layers_with_torchs_values() -> None:
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    model = engine.model("cpu")
    if "cpu" not in engine.accelerated:
        pytest.skip("this torch has no oneDNN linear kernel")
    kinds = {type(m).__name__ for m in model.modules()}
    assert "OneDnnLinear" in kinds and "Linear" not in kinds
    # the exact GELU rides on its matmul
    assert all(type(layer.intermediate.intermediate_act_fn).__name__ == "Identity"
               for layer in model.encoder.layer)
    ids = [row for row, _ in engine.encode(_texts(12))]
    fast = _forward(model, ids)
    stock = _forward(_stock_model(), ids)
    assert max(float(np.abs(a - b).max()) for a, b in zip(fast, stock, strict=True)) < 1e-5


def _off_by_a_percent(layer, x):
    return type(layer).__mro__[1].forward(layer, x) * 1.01


def _no_kernel(layer, x):
    raise RuntimeError("no kernel for this input")


@pytest.mark.parametrize("forward", [_off_by_a_percent, _no_kernel],
                         ids=["values disagree", "kernel fails"])
def test_layers_that_fail_the_probe_are_put_back(monkeypatch: pytest.MonkeyPatch,
                                                 forward) -> None:
    real = cpu_layers._module_class

    def broken(torch_module):
        class Broken(real(torch_module)):  # type: ignore[misc, valid-type]
            def forward(self, x):
                return forward(self, x)

        return Broken

    monkeypatch.setattr(cpu_layers, "_module_class", broken)
    model = _stock_model()
    before = {name: type(m).__name__ for name, m in model.named_modules()}
    assert not cpu_layers.accelerate(model)
    assert {name: type(m).__name__ for name, m in model.named_modules()} == before


def test_the_environment_can_keep_torchs_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_layers.ONEDNN_ENV, "0")
    engine = _engine(bs.DEFAULT_MODEL, bs.DEFAULT_LAYER)
    model = engine.model("cpu")
    assert "cpu" not in engine.accelerated
    assert "OneDnnLinear" not in {type(m).__name__ for m in model.modules()}


def test_the_probe_runs_on_one_thread_and_gives_the_threads_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two forward passes of 32 tokens: threads only wait for each other there."""
    seen = []
    real = cpu_layers._probe

    def probe(torch_module, model):
        seen.append(torch_module.get_num_threads())
        return real(torch_module, model)

    monkeypatch.setattr(cpu_layers, "_probe", probe)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = _stock_model()
        if not cpu_layers.accelerate(model) and not seen:
            pytest.skip("this torch has no oneDNN linear kernel")
        assert seen == [1, 1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
