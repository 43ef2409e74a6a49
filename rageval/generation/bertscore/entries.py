"""One text's cached embedding (:class:`_Entry`) and its cache key.

An entry holds the text's token ids and one float32 vector per token (about 1.5 KB per token
with all-MiniLM-L6-v2, 4 KB with roberta-large: some 150 KB and 400 KB for a 100-token answer).
Its key hashes the engine's namespace (model, layer, truncation, library versions) with the
text; :mod:`~rageval.generation.bertscore.packs` holds the format entries are stored in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class _Entry:
    """One text as the model saw it: token ids (special tokens included, truncated), their
    normalised embeddings (None when there are no tokens) and the length before truncation."""

    ids: np.ndarray
    emb: np.ndarray | None
    full_length: int

    @property
    def truncated(self) -> bool:
        return self.full_length > len(self.ids)

    @property
    def nbytes(self) -> int:
        return self.ids.nbytes + (0 if self.emb is None else self.emb.nbytes) + 200


# Part of every engine's cache namespace: a new value keeps old caches' entries apart.
_FORMAT_VERSION = 1


def _text_key(namespace: str, text: str) -> bytes:
    return hashlib.sha256(
        namespace.encode() + b"\0" + text.encode("utf-8", "surrogatepass")
    ).digest()
