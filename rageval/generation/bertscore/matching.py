"""Greedy matching: (P, R, F) of (answer, reference) pairs from their token embeddings and
weights, with bert-score's arithmetic and edge cases, in batches of pairs padded on the host
(the CPU's path; on a GPU, :mod:`~.resident` does the same steps on the device)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rageval.generation.bertscore.dependencies import _import
from rageval.generation.bertscore.entries import _Entry

_MATCH_PAIRS = 256  # pairs per batched matching step
_MATCH_ELEMENTS = 1 << 24  # bound on the similarity (and embedding) elements of one step


def _pair_batches(live: list[int], pairs: Sequence[tuple[str, str]],
                  length: Mapping[str, int], dim: int) -> list[tuple[list[int], int, int]]:
    """The live pairs' indices in matching steps, each with its answer and reference widths:
    longest answers first, at most ``_MATCH_PAIRS`` pairs and ``_MATCH_ELEMENTS`` similarity
    (or embedding) elements a step, so that little is padded."""
    order = sorted(live, key=lambda k: (-length[pairs[k][0]], -length[pairs[k][1]]))
    steps: list[tuple[list[int], int, int]] = []
    start = 0
    while start < len(order):
        width_h = length[pairs[order[start]][0]]
        stop = start + 1
        width_r = length[pairs[order[start]][1]]
        while stop < len(order) and stop - start < _MATCH_PAIRS:
            wider_r = max(width_r, length[pairs[order[stop]][1]])
            count = stop - start + 1
            if count * max(width_h * wider_r, (width_h + wider_r) * dim) > _MATCH_ELEMENTS:
                break
            width_r = wider_r
            stop += 1
        steps.append((order[start:stop], width_h, width_r))
        start = stop
    return steps


def _match(
    entries: Mapping[str, _Entry],
    weights: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
    device: str,
) -> np.ndarray:
    """(P, R, F) of every (answer, reference) pair: greedy matching with bert-score's
    arithmetic and edge cases, batched on the model's device.

    The best cosine similarity of each token is taken over the other text's tokens, and counts
    at least 0 (bert-score's zero padding; see :class:`~.metric.BertScore`): so the embeddings of
    a batch of pairs are zero-padded and the padding changes nothing. P and R are the
    weighted means of the best similarities; F = 2PR / (P + R) from those, then, as bert-score,
    P and R are set to 0 where either text has exactly two tokens (an empty text: [CLS] [SEP]),
    and F to 0 where it is NaN.
    """
    out = np.zeros((len(pairs), 3), dtype=np.float64)
    live = [k for k, (a, r) in enumerate(pairs)
            if entries[a].emb is not None and entries[r].emb is not None]
    if not live:
        return out  # tokenizers that give no token at all: 0, as an empty text
    torch = _import("torch")
    dim = entries[pairs[live[0]][0]].emb.shape[1]  # type: ignore[union-attr]
    length = {text: len(entries[text].ids) for pair in pairs for text in pair}
    for chunk, width_h, width_r in _pair_batches(live, pairs, length, dim):
        hyp = torch.zeros((len(chunk), width_h, dim), dtype=torch.float32)
        ref = torch.zeros((len(chunk), width_r, dim), dtype=torch.float32)
        hyp_w = np.zeros((len(chunk), width_h))
        ref_w = np.zeros((len(chunk), width_r))
        for row, k in enumerate(chunk):
            a, r = pairs[k]
            hyp[row, : length[a]] = torch.from_numpy(entries[a].emb)
            ref[row, : length[r]] = torch.from_numpy(entries[r].emb)
            hyp_w[row, : length[a]] = weights[a]
            ref_w[row, : length[r]] = weights[r]
        with torch.inference_mode():
            sim = torch.bmm(hyp.to(device), ref.to(device).transpose(1, 2))
            best_p = sim.max(dim=2).values.clamp_min(0).cpu().numpy().astype(np.float64)
            best_r = sim.max(dim=1).values.clamp_min(0).cpu().numpy().astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = (best_p * (hyp_w / hyp_w.sum(axis=1, keepdims=True))).sum(axis=1)
            r = (best_r * (ref_w / ref_w.sum(axis=1, keepdims=True))).sum(axis=1)
            f = 2 * p * r / (p + r)
        empty = np.array([length[pairs[k][0]] == 2 or length[pairs[k][1]] == 2 for k in chunk])
        p[empty] = 0.0
        r[empty] = 0.0
        f[np.isnan(f)] = 0.0
        out[chunk] = np.stack([p, r, f], axis=1)
    return out
