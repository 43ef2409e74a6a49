"""Faster forward passes on a CPU: the model's linear layers run as oneDNN matmuls.

On a CPU the forward passes are almost all of BERTScore's time, and three quarters of a pass
is the linear layers. torch runs ``nn.Linear`` through MKL's sgemm, which on some processors
(AMD's among them) does not take its widest vector code path; oneDNN's matmul primitive picks
its kernels from the processor's instruction set (on an AVX-512 AMD EPYC it runs the same
products 2.3 times as fast). The exact-erf GELU of BERT-style intermediate layers is fused into
its matmul as a post-op, which saves a pass over the largest activations.

The arithmetic is the same (float32 products and sums, only their order differs), so the
embeddings move at the level of float32 rounding, as they do between a CPU and a GPU; the
scores stay within 1e-6 of bert-score's. A model whose swapped layers do not reproduce the
stock forward pass on a probe input keeps its stock layers (so does every model when
``RAGEVAL_BERTSCORE_ONEDNN=0``).
"""

from __future__ import annotations

import os
from typing import Any

from rageval.generation.bertscore.dependencies import _import

ONEDNN_ENV = "RAGEVAL_BERTSCORE_ONEDNN"
# The probe's tolerance, relative to the largest hidden state: float32 rounding through a
# model's layers is about 1e-6 of it; a wrong kernel or activation is off by far more.
_PROBE_TOLERANCE = 1e-4
_PROBE_TOKENS = 16


def _module_class(torch: Any) -> type:
    """The replacement layer, built on first use (torch is imported lazily)."""

    class OneDnnLinear(torch.nn.Module):  # type: ignore[misc, name-defined]
        """``y = act(x @ W.T + b)`` by oneDNN (``act``: none, or gelu with exact erf)."""

        def __init__(self, linear: Any, gelu: bool = False) -> None:
            super().__init__()
            self.weight = linear.weight.detach()
            self.bias = None if linear.bias is None else linear.bias.detach()
            self.attr = "gelu" if gelu else "none"
            self.algorithm = "none" if gelu else ""  # oneDNN's name for the exact erf GELU
            self.in_features = linear.in_features
            self.out_features = linear.out_features

        def forward(self, x: Any) -> Any:
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, self.attr, [],
                                                      self.algorithm)

    return OneDnnLinear


def _available(torch: Any, model: Any) -> bool:
    if os.environ.get(ONEDNN_ENV, "1").strip().lower() in ("0", "no", "off", "false"):
        return False
    if not (torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    params = list(model.parameters())
    return bool(params) and all(p.device.type == "cpu" and p.dtype == torch.float32
                                for p in params)


def _exact_gelu(torch: Any, act: Any) -> bool:
    """Whether ``act`` is the exact (erf) GELU: transformers' ``gelu`` or ``nn.GELU()``."""
    if isinstance(act, torch.nn.GELU):
        return act.approximate == "none"
    return (type(act).__name__ == "GELUActivation"
            and getattr(act, "act", None) is torch.nn.functional.gelu)


def _plan(torch: Any, model: Any) -> list[tuple[Any, str, Any]]:
    """(parent, attribute, replacement) for every linear layer of the model."""
    layer_class = _module_class(torch)
    swaps: list[tuple[Any, str, Any]] = []
    for parent in model.modules():
        act = getattr(parent, "intermediate_act_fn", None)
        fuse = (isinstance(getattr(parent, "dense", None), torch.nn.Linear)
                and act is not None and _exact_gelu(torch, act))
        for name, child in parent.named_children():
            if isinstance(child, torch.nn.Linear):
                gelu = fuse and name == "dense"
                swaps.append((parent, name, layer_class(child, gelu=gelu)))
        if fuse:
            swaps.append((parent, "intermediate_act_fn", torch.nn.Identity()))
    return swaps


def _probe(torch: Any, model: Any) -> Any:
    """The model's last hidden states on a fixed input of in-vocabulary token ids."""
    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or 0)
    if vocab < 2:
        return None
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, vocab, (2, _PROBE_TOKENS), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, _PROBE_TOKENS // 2:] = 0  # a padded row too
    with torch.inference_mode():
        return model(ids, attention_mask=mask)[0]


def accelerate(model: Any) -> bool:
    """Run the linear layers of a CPU, float32 model on oneDNN, in place; True if done.

    The swap is kept only if the model's output on a probe input matches the stock layers'
    (else, or on any error from the kernels, the stock layers are put back)."""
    torch = _import("torch")
    if not _available(torch, model):
        return False
    swaps = _plan(torch, model)
    if not swaps:
        return False
    originals = [(parent, name, getattr(parent, name)) for parent, name, _ in swaps]
    threads = torch.get_num_threads()
    # One thread: the probe's input is tiny, and on a busy machine each operation's threads
    # would wait for each other (seconds, for two forward passes of 32 tokens).
    torch.set_num_threads(1)
    try:
        agree = _swaps_agree(torch, model, swaps)
    finally:
        torch.set_num_threads(threads)
    if agree:
        return True
    for parent, name, module in originals:  # not the same numbers: keep torch's layers
        setattr(parent, name, module)
    return False


def _swaps_agree(torch: Any, model: Any, swaps: list[tuple[Any, str, Any]]) -> bool:
    """Put ``swaps`` in place; whether the model's probe output is then torch's own (False
    when the model has no probe, or when the kernels fail on it)."""
    try:
        expected = _probe(torch, model)
        for parent, name, module in swaps:
            setattr(parent, name, module)
        got = _probe(torch, model)
    except Exception:  # a probe: any failure of the kernels means "keep torch's layers"
        return False
    if expected is None or got is None:
        return False
    scale = float(expected.abs().max()) or 1.0
    return float((got - expected).abs().max()) <= _PROBE_TOLERANCE * scale
