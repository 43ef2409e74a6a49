"""The pack file: many texts' cached embeddings in one file, written at once, read entry by entry.

A pack is a header, an index (one fixed-size row per entry: its key, token count, embedding
width, length before truncation, checksum and where its bytes start), a checksum of header and
index, then the entries' bytes: each entry's token ids (int32) followed by its embeddings
(float32), little-endian. The index is built as one numpy array and the entries' arrays are
written as they are (no per-entry serialisation); each entry's bytes carry a CRC-32, checked
when the entry is read.

A pack whose size is not the one its header promises (a torn write), or whose header or index
fails its checksum, reads as no pack; an entry whose bytes fail their checksum reads as no entry.
Nothing is ever read as garbage: what fails a check is recomputed.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from rageval.generation.bertscore.entries import _Entry

_MAGIC = b"RGVP"
_PACK_FORMAT = 1
_HEADER = struct.Struct("<4sHHIQ")  # magic, format, reserved, entries, bytes of entry data
_CHECK = struct.Struct("<I")  # CRC-32 of header and index
# Keys are raw bytes (not "S32", which would drop a digest's trailing zero bytes).
_KEY_BYTES = 32
_INDEX = np.dtype([("key", "u1", (_KEY_BYTES,)), ("tokens", "<u4"), ("dim", "<u4"), ("full", "<u4"),
                   ("crc", "<u4"), ("offset", "<u8")])
PACK_SUFFIX = ".pack"


@dataclass(frozen=True)
class PackIndex:
    """A pack's index as read back: one row per entry (see ``_INDEX``)."""

    rows: np.ndarray

    def keys(self) -> list[bytes]:
        blob = self.rows["key"].tobytes()
        return [blob[k:k + _KEY_BYTES] for k in range(0, len(blob), _KEY_BYTES)]


def _entry_arrays(entry: _Entry) -> tuple[np.ndarray, np.ndarray | None]:
    ids = np.ascontiguousarray(entry.ids, dtype="<i4")
    emb = None if entry.emb is None else np.ascontiguousarray(entry.emb, dtype="<f4")
    return ids, emb


def _crc(ids: np.ndarray, emb: np.ndarray | None) -> int:
    crc = zlib.crc32(memoryview(ids).cast("B"))
    return crc if emb is None else zlib.crc32(memoryview(emb).cast("B"), crc)


def write_pack(handle: BinaryIO, items: Sequence[tuple[bytes, _Entry]]) -> int:
    """Write ``items`` (key, entry) as one pack to ``handle``; returns the bytes written."""
    arrays = [_entry_arrays(entry) for _, entry in items]
    rows = np.zeros(len(items), dtype=_INDEX)
    rows["key"] = np.frombuffer(b"".join(key for key, _ in items),
                                dtype=np.uint8).reshape(-1, _KEY_BYTES)
    rows["tokens"] = [len(ids) for ids, _ in arrays]
    rows["dim"] = [0 if emb is None else emb.shape[1] for _, emb in arrays]
    rows["full"] = [entry.full_length for _, entry in items]
    rows["crc"] = [_crc(ids, emb) for ids, emb in arrays]
    sizes = rows["tokens"].astype(np.uint64) * (1 + rows["dim"].astype(np.uint64)) * 4
    start = _HEADER.size + rows.nbytes + _CHECK.size
    rows["offset"] = start + np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.uint64)
    data_bytes = int(sizes.sum())
    head = _HEADER.pack(_MAGIC, _PACK_FORMAT, 0, len(items), data_bytes) + rows.tobytes()
    buffers: list[memoryview] = [memoryview(head + _CHECK.pack(zlib.crc32(head)))]
    for ids, emb in arrays:
        buffers.append(memoryview(ids).cast("B"))
        if emb is not None:
            buffers.append(memoryview(emb).cast("B"))
    handle.writelines(buffers)
    return start + data_bytes


def read_index(fd: int) -> PackIndex | None:
    """The index of the pack open at ``fd``, or None when the pack is torn or damaged."""
    size = os.fstat(fd).st_size
    header = os.pread(fd, _HEADER.size, 0)
    if len(header) != _HEADER.size:
        return None
    magic, version, _reserved, count, data_bytes = _HEADER.unpack(header)
    if magic != _MAGIC or version != _PACK_FORMAT:
        return None
    index_bytes = count * _INDEX.itemsize
    if size != _HEADER.size + index_bytes + _CHECK.size + data_bytes:
        return None
    rest = os.pread(fd, index_bytes + _CHECK.size, _HEADER.size)
    if len(rest) != index_bytes + _CHECK.size:
        return None
    (check,) = _CHECK.unpack_from(rest, index_bytes)
    if zlib.crc32(rest[:index_bytes], zlib.crc32(header)) != check:
        return None
    return PackIndex(np.frombuffer(rest, dtype=_INDEX, count=count))


def read_entry(fd: int, row: np.void) -> _Entry | None:
    """The entry an index row describes, or None when its bytes fail their checksum."""
    tokens, dim = int(row["tokens"]), int(row["dim"])
    buffer = np.empty(4 * tokens * (1 + dim), dtype=np.uint8)
    if os.preadv(fd, [buffer], int(row["offset"])) != buffer.nbytes:
        return None
    ids = buffer[: 4 * tokens].view("<i4")
    emb = buffer[4 * tokens:].view("<f4").reshape(tokens, dim) if dim else None
    if _crc(ids, emb) != int(row["crc"]):
        return None
    return _Entry(ids.astype(np.int64), None if emb is None else emb.view(np.float32),
                  int(row["full"]))
