"""One text's cached embedding (:class:`_Entry`) and its byte format on disk.

An entry holds the text's token ids and one float32 vector per token (about 1.5 KB per token
with all-MiniLM-L6-v2, 4 KB with roberta-large: some 150 KB and 400 KB for a 100-token answer).
Every file carries its own key and a checksum; data that fails either check reads as no entry.
"""

from __future__ import annotations

import hashlib
import struct
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


# The file format; also part of every engine's cache namespace.
_FORMAT_VERSION = 1
_MAGIC = b"RGVE"
_HEADER = struct.Struct("<4sHHIII32s")  # magic, format, reserved, tokens, dim, full length, key
_CHECK_BYTES = 16


def _text_key(namespace: str, text: str) -> bytes:
    return hashlib.sha256(
        namespace.encode() + b"\0" + text.encode("utf-8", "surrogatepass")
    ).digest()


def _serialise(key: bytes, entry: _Entry) -> bytes:
    tokens = len(entry.ids)
    dim = 0 if entry.emb is None else entry.emb.shape[1]
    body = (_HEADER.pack(_MAGIC, _FORMAT_VERSION, 0, tokens, dim, entry.full_length, key)
            + entry.ids.astype("<i4").tobytes()
            + (b"" if entry.emb is None else entry.emb.astype("<f4").tobytes()))
    return body + hashlib.blake2b(body, digest_size=_CHECK_BYTES).digest()


def _deserialise(key: bytes, data: bytes) -> _Entry | None:
    """The entry in ``data``, or None when it is not a complete, intact entry for ``key``."""
    if len(data) < _HEADER.size + _CHECK_BYTES:
        return None
    magic, version, _reserved, tokens, dim, full, stored_key = _HEADER.unpack_from(data)
    if magic != _MAGIC or version != _FORMAT_VERSION or stored_key != key:
        return None
    size = _HEADER.size + 4 * tokens + 4 * tokens * dim + _CHECK_BYTES
    if len(data) != size:
        return None
    body, check = data[:-_CHECK_BYTES], data[-_CHECK_BYTES:]
    if hashlib.blake2b(body, digest_size=_CHECK_BYTES).digest() != check:
        return None
    offset = _HEADER.size
    ids = np.frombuffer(data, dtype="<i4", count=tokens, offset=offset).astype(np.int64)
    emb = None
    if dim:
        emb = np.frombuffer(data, dtype="<f4", count=tokens * dim, offset=offset + 4 * tokens)
        emb = emb.reshape(tokens, dim).astype(np.float32)
    return _Entry(ids, emb, int(full))
