"""The device-resident path, for a model on a GPU: a scoring step's token embeddings stay on the
model's device from the forward passes to the greedy matching, and only each pair's (P, R, F)
comes back to the host, with a copy of the new embeddings for the caches.

The host path (:func:`~.engine._Engine.embed` and :func:`~.matching._match`, the one a CPU
takes) copies every text's embeddings to the host after its forward pass, pads each matching
step's pairs on the host, copies them back to the device for the similarities and weighs them in
numpy. Here, instead:

- the forward passes write each text's embeddings into one ``[tokens, dim]`` tensor on the
  device (:func:`_embed_on_device`); the copy of them the memory and disk caches keep is made
  batch by batch on a side CUDA stream into pinned host memory, so it runs while the next
  forward passes do, and is waited for once, after the last (each text's copy is then taken
  out of that buffer, so that it owns its memory);
- the texts found in a cache are copied to the device at once, in bulk (:func:`_gather`);
- each matching step (:func:`_match_resident`, the host path's steps) pads its pairs on the
  device by gathering rows of that tensor, takes the similarities and their maxima, and weighs
  them there, in float64 as the host path does; the (P, R, F) of every pair come back in one
  copy at the end.

The arithmetic is the host path's, operation for operation (the same padded products, the same
float64 weighted means, the same edge cases), so the values agree with it to float64 rounding
on the same device, and with bert-score within 1e-6. The code is generic over torch devices:
only CUDA gets the side stream and pinned memory; elsewhere the copies are plain ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rageval.generation.bertscore.dependencies import _import
from rageval.generation.bertscore.embeddings import _cached, _keep, _passed
from rageval.generation.bertscore.engine import _length_batches
from rageval.generation.bertscore.matching import _pair_batches
from rageval.generation.bertscore.progress import _STATS

if TYPE_CHECKING:
    from rageval.generation.bertscore.disk_cache import _DiskCache
    from rageval.generation.bertscore.engine import _Engine
    from rageval.generation.bertscore.entries import _Entry


def _use_resident(device: str) -> bool:
    """Whether scoring on ``device`` takes the device-resident path: on a CUDA device only.
    On a CPU host and device are one memory, so there are no copies to save; other devices
    (Apple's ``mps``) lack the float64 the weighing needs, and keep the host path, which
    weighs on the host. A device string torch cannot read also takes the host path, whose
    model loading turns it into a clear error."""
    try:
        return _import("torch").device(device).type == "cuda"
    except (RuntimeError, ValueError):
        return False


#: Share of the device's free memory a scoring step's embeddings may take on the resident
#: path (counted twice: the cached and computed parts are joined into one tensor); a larger
#: step takes the host path, whose device memory is bounded by its matching steps.
_DEVICE_SHARE = 0.4


def _fits_on_device(device: str, tokens: int, dim: int) -> bool:
    """Whether ``tokens`` embeddings of ``dim`` floats fit in the device's free memory, with
    room for the joined copy and the matching steps."""
    torch = _import("torch")
    if torch.device(device).type != "cuda":
        return True  # only CUDA reports its free memory; elsewhere the path is forced (tests)
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return 2 * tokens * dim * 4 <= _DEVICE_SHARE * free


@dataclass(frozen=True)
class _Resident:
    """A scoring step's texts on the device: their embeddings one after another in ``flat``
    (``[tokens, dim]``, float32), and where each text's rows are (first row, token count).
    Texts without tokens have no rows."""

    flat: Any
    rows: dict[str, tuple[int, int]]


def _resident_embeddings(
    engine: _Engine,
    texts: Sequence[str],
    disk: _DiskCache | None,
    device: str,
    batch_size: int,
    progress: Callable[[Sequence[str], bool], None] | None = None,
) -> tuple[dict[str, _Entry], _Resident | None]:
    """Every text's entry, as :func:`~.embeddings._embeddings` gives it (from memory, else from
    disk, else computed, and then stored in both), and every text's embeddings on ``device``;
    None instead of those when the step's embeddings would not fit in the device's free memory
    (:func:`_fits_on_device`): they are then computed as the host path computes them."""
    out, missing, keys = _cached(engine, texts, disk, progress)
    cached = [text for text, entry in out.items() if entry.emb is not None]
    encoded = engine.encode(missing) if missing else []
    embed = [k for k, (ids, _) in enumerate(encoded) if len(ids)]
    tokens = (sum(len(out[text].ids) for text in cached)
              + sum(len(encoded[k][0]) for k in embed))
    if embed:
        dim = getattr(getattr(engine.model(device), "config", None), "hidden_size", None)
    else:  # every text cached: its width is the embeddings', the model is not loaded
        dim = out[cached[0]].emb.shape[-1] if cached else None
    on_device = not isinstance(dim, int) or _fits_on_device(device, tokens, dim)
    computed, vectors = None, {}
    if embed:
        ids = [encoded[k][0] for k in embed]
        passed = _passed(missing, embed, progress)
        if on_device:
            computed, host = _embed_on_device(engine, ids, device, batch_size, passed)
        else:
            host = engine.embed(ids, device, batch_size, passed)
        vectors = dict(zip(embed, host, strict=True))
    if missing:
        _keep(engine, (missing, encoded, keys), vectors, disk, out, progress)
    if not on_device:
        return out, None
    return out, _gather(out, cached, [missing[k] for k in vectors], computed, device)


def _embed_on_device(
    engine: _Engine,
    ids: Sequence[np.ndarray],
    device: str,
    batch_size: int,
    progress: Callable[[list[int]], None] | None = None,
) -> tuple[Any, list[np.ndarray]]:
    """The texts' embeddings (the engine's forward passes, batched as
    :meth:`~.engine._Engine.embed` does) in one ``[tokens, dim]`` tensor on ``device``, the
    texts one after another in the order given, and a host copy of each."""
    torch = _import("torch")
    model = engine.model(device)
    lengths = np.array([len(t) for t in ids], dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    total = int(lengths.sum())
    flat = host = None
    copies = _HostCopies(torch, torch.device(device))
    at = np.zeros(len(ids), dtype=np.int64)  # where each text's rows begin in the host copy
    done = 0
    with torch.inference_mode():
        for chunk in _length_batches(lengths.tolist(), batch_size):
            hidden = engine.forward(model, [ids[k] for k in chunk], device)
            rows, width, dim = hidden.shape
            if flat is None:
                flat = torch.empty((total, dim), dtype=torch.float32, device=hidden.device)
                host = flat if copies.same_memory else _host_buffer(torch, (total, dim),
                                                                    hidden.device)
            source, target = _token_rows(lengths[chunk], offsets[chunk], width)
            tokens = hidden.reshape(rows * width, dim).index_select(0, _on(torch, source,
                                                                           hidden.device))
            flat.index_copy_(0, _on(torch, target, hidden.device), tokens)
            if not copies.same_memory:
                copies.copy(host[done: done + len(source)], tokens)
                at[chunk] = done + np.cumsum(lengths[chunk]) - lengths[chunk]
                done += len(source)
            _STATS["forward_passes"] += 1
            _STATS["texts_embedded"] += len(chunk)
            if progress is not None:
                progress(chunk)
    copies.wait()
    if copies.same_memory:
        at = offsets
    array = host.numpy()  # type: ignore[union-attr]
    # Each text's copy owns its memory (the memory cache's budget counts what it holds, and the
    # pinned buffer goes back to torch's pool for the next step).
    return flat, [array[start: start + n].copy() for start, n in zip(at.tolist(),
                                                                      lengths.tolist(),
                                                                      strict=True)]


def _token_rows(lengths: np.ndarray, offsets: np.ndarray,
                width: int) -> tuple[np.ndarray, np.ndarray]:
    """For a forward pass of texts of ``lengths`` padded to ``width``: the rows of its
    flattened ``[texts * width, dim]`` output that are tokens, and the rows of the step's
    tensor they go to (each text's from its offset on)."""
    runs = np.cumsum(lengths) - lengths
    within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(runs, lengths)
    source = np.repeat(np.arange(len(lengths), dtype=np.int64) * width, lengths) + within
    return source, np.repeat(offsets, lengths) + within


class _HostCopies:
    """Copies from the device to the host. On CUDA they run on a side stream into pinned memory
    (each after the work that made its source), so they overlap the next forward passes;
    :meth:`wait` waits for them all. On a CPU there is nothing to copy (``same_memory``)."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch = torch
        self.same_memory = device.type == "cpu"
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def copy(self, target: Any, source: Any) -> None:
        if self.stream is None:
            target.copy_(source)
            return
        self.stream.wait_stream(self.torch.cuda.current_stream(source.device))
        with self.torch.cuda.stream(self.stream):
            target.copy_(source, non_blocking=True)
        source.record_stream(self.stream)  # its memory is not reused before the copy is done

    def wait(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()


def _host_buffer(torch: Any, shape: tuple[int, int], device: Any) -> Any:
    """Host memory for copies to or from ``device``: pinned for CUDA (asynchronous copies)."""
    return torch.empty(shape, dtype=torch.float32, pin_memory=device.type == "cuda")


def _on(torch: Any, array: np.ndarray, device: Any) -> Any:
    return torch.from_numpy(array).to(device, non_blocking=True)


def _gather(entries: Mapping[str, _Entry], cached: Sequence[str], computed: Sequence[str],
            computed_flat: Any, device: str) -> _Resident:
    """One tensor on ``device`` of the cached texts' embeddings (copied there in bulk) followed
    by the computed ones' (already there), and where each text's rows are."""
    torch = _import("torch")
    rows: dict[str, tuple[int, int]] = {}
    start = 0
    for text in (*cached, *computed):
        count = len(entries[text].ids)
        rows[text] = (start, count)
        start += count
    parts = [] if computed_flat is None else [computed_flat]
    if cached:
        arrays = [entries[text].emb for text in cached]
        tokens = sum(len(array) for array in arrays)  # type: ignore[arg-type]
        staging = _host_buffer(torch, (tokens, arrays[0].shape[1]),  # type: ignore[union-attr]
                               torch.device(device))
        np.concatenate(arrays, out=staging.numpy())  # type: ignore[arg-type]
        parts.insert(0, staging.to(device, non_blocking=True))
    with torch.inference_mode():
        if not parts:
            return _Resident(torch.zeros((0, 0), dtype=torch.float32, device=device), rows)
        return _Resident(parts[0] if len(parts) == 1 else torch.cat(parts), rows)


def _match_resident(
    resident: _Resident,
    weights: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
) -> np.ndarray:
    """(P, R, F) of every (answer, reference) pair, as :func:`~.matching._match` gives them
    (same steps, arithmetic and edge cases; see there), from embeddings and weights on the
    device: each step's pairs are padded there, and the results come back at the end."""
    out = np.zeros((len(pairs), 3), dtype=np.float64)
    rows = resident.rows
    live = [k for k, (a, r) in enumerate(pairs) if a in rows and r in rows]
    if not live:
        return out  # tokenizers that give no token at all: 0, as an empty text
    torch = _import("torch")
    flat = resident.flat
    device = flat.device
    length = {text: count for text, (_, count) in rows.items()}
    places = np.array([(*rows[a], *rows[r]) for a, r in (pairs[k] for k in live)],
                      dtype=np.int64)  # answer offset, length, reference offset, length
    position = {k: n for n, k in enumerate(live)}
    with torch.inference_mode():
        weight = torch.from_numpy(np.concatenate([weights[text] for text in rows])).to(device)
        where = torch.from_numpy(places).to(device)
        results = torch.zeros((len(live), 3), dtype=torch.float64, device=device)
        for chunk, width_h, width_r in _pair_batches(live, pairs, length, flat.shape[1]):
            at = _on(torch, np.array([position[k] for k in chunk], dtype=np.int64), device)
            step = where.index_select(0, at)
            hyp, hyp_w = _padded(torch, flat, weight, step[:, 0], step[:, 1], width_h)
            ref, ref_w = _padded(torch, flat, weight, step[:, 2], step[:, 3], width_r)
            sim = torch.bmm(hyp, ref.transpose(1, 2))
            best_p = sim.max(dim=2).values.clamp_min(0).double()
            best_r = sim.max(dim=1).values.clamp_min(0).double()
            p = (best_p * (hyp_w / hyp_w.sum(dim=1, keepdim=True))).sum(dim=1)
            r = (best_r * (ref_w / ref_w.sum(dim=1, keepdim=True))).sum(dim=1)
            f = 2 * p * r / (p + r)
            empty = (step[:, 1] == 2) | (step[:, 3] == 2)
            f = torch.where(torch.isnan(f), torch.zeros_like(f), f)
            prf = torch.stack([p.masked_fill(empty, 0.0), r.masked_fill(empty, 0.0), f], dim=1)
            results.index_copy_(0, at, prf)
        out[live] = results.cpu().numpy()
    return out


def _padded(torch: Any, flat: Any, weight: Any, offsets: Any, lengths: Any,
            width: int) -> tuple[Any, Any]:
    """The embeddings ``[pairs, width, dim]`` and weights ``[pairs, width]`` of one side of a
    matching step, gathered from the step's rows and zero-padded, on the device."""
    steps = torch.arange(width, device=flat.device)
    padding = steps.unsqueeze(0) >= lengths.unsqueeze(1)
    index = (offsets.unsqueeze(1) + steps.unsqueeze(0)).masked_fill(padding, 0)
    embeddings = flat[index].masked_fill(padding.unsqueeze(2), 0.0)
    return embeddings, weight[index].masked_fill(padding, 0.0)
