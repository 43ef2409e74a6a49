"""Tables of rows with named columns, before any column is given a rageval meaning.

A :class:`Table` holds every row of a JSONL, JSON, CSV, Parquet or Arrow file as a dict from
column name to value (an absent, null or empty-cell value is left out), with the number of the
line (or, for Parquet and Arrow, the 1-based row) it came from. The column set must be known
before rows are converted (ragas' columns are recognised by name), so files are read whole.

Arrow input is what ``datasets.save_to_disk`` writes: a directory with ``state.json`` naming
its ``data-NNNNN-of-NNNNN.arrow`` shards (Arrow IPC streams) in order, or, for a
``DatasetDict``, a ``dataset_dict.json`` listing one such directory per split. A single
``.arrow`` file (stream or file format) is read too.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Any

from rageval.core.errors import InputError
from rageval.core.records.readers import csv_cells
from rageval.inputs.files import check_file, iter_raw

__all__ = ["Table", "arrow_files", "read_table"]

_ARROW_FILE_MAGIC = b"ARROW1"  # the IPC file format starts with it; a stream does not


@dataclass(frozen=True)
class Table:
    """The rows of a file: ``(line, row)`` pairs, the columns in order of first appearance,
    the unit rows are numbered in (``line`` or ``row``) and how cells are typed (``json``:
    as decoded, ``csv``: strings, ``frame``: as polars read them)."""

    rows: list[tuple[int, Any]]
    columns: list[str]
    unit: str
    cells: str


def read_table(path: str, fmt: str, split: str, limit: int) -> Table:
    """The table held in ``path`` (``fmt`` one of the input formats)."""
    if fmt in ("jsonl", "json"):
        rows = list(iter_raw(path, fmt, limit))
        columns = dict.fromkeys(key for _, item in rows if isinstance(item, dict) for key in item)
        return Table(rows, list(columns), "line", "json")
    if fmt == "csv":
        return _csv_table(path, limit)
    frame = _read_parquet(path) if fmt == "parquet" else read_arrow(path, split)
    rows = [(number, {key: value for key, value in row.items() if value is not None})
            for number, row in enumerate(frame.iter_rows(named=True), 1)]
    return Table(rows, list(frame.columns), "row", "frame")


# --------------------------------------------------------------------------------------------
# CSV: any header (no required column), cells kept as strings
# --------------------------------------------------------------------------------------------


def _csv_table(path: str, limit: int) -> Table:
    header, rows = csv_cells(path, path, limit)
    return Table(list(rows), header, "line", "csv")


# --------------------------------------------------------------------------------------------
# Parquet and Arrow, read by polars
# --------------------------------------------------------------------------------------------


def _read_parquet(path: str) -> Any:
    import polars as pl

    check_file(path)
    try:
        return pl.read_parquet(path)
    except Exception as error:  # polars raises several unrelated types for bad files
        raise InputError(f"cannot read Parquet file: {error}", path=path) from None


def _json_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror or error}", path=path) from None
    except ValueError as error:
        raise InputError(f"malformed JSON: {error}", path=path) from None


def _split_directory(path: str, split: str) -> str:
    """The directory of one split of a saved ``DatasetDict``: ``split`` when it has one of
    that name, else its only split."""
    listing = os.path.join(path, "dataset_dict.json")
    data = _json_file(listing)
    splits = data.get("splits") if isinstance(data, dict) else None
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
        raise InputError("expected a list of split names", path=listing, field="splits")
    if split in splits:
        return os.path.join(path, split)
    if len(splits) == 1:
        return os.path.join(path, splits[0])
    raise InputError(f"no split {split!r} in this DatasetDict (its splits: {splits}); choose "
                     "one with --split", path=listing, field="splits")


def arrow_files(path: str, split: str) -> list[str]:
    """The Arrow files of ``path`` in row order: the file itself, or the shards of a
    directory written by ``datasets.save_to_disk`` (``split`` picks a DatasetDict's split)."""
    check_file(path, directory=True)
    if not os.path.isdir(path):
        return [path]
    if os.path.exists(os.path.join(path, "dataset_dict.json")):
        path = _split_directory(path, split)
    state = os.path.join(path, "state.json")
    if os.path.exists(state):
        data = _json_file(state)
        entries = data.get("_data_files") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and isinstance(e.get("filename"), str) for e in entries):
            raise InputError("expected a list of {\"filename\": ...} objects", path=state,
                             field="_data_files")
        files = [os.path.join(path, entry["filename"]) for entry in entries]
    else:  # shard names sort in row order (data-00000-of-00004.arrow, ...)
        files = sorted(glob.glob(os.path.join(glob.escape(path), "data-*.arrow")))
    if not files:
        raise InputError("no Arrow data files (data-*.arrow) in this directory; expected one "
                         "written by datasets' save_to_disk", path=path)
    return files


def read_arrow(path: str, split: str) -> Any:
    """One polars frame of every row of the Arrow input ``path``."""
    import polars as pl

    frames = []
    for name in arrow_files(path, split):
        check_file(name)
        try:
            with open(name, "rb") as handle:
                is_file_format = handle.read(len(_ARROW_FILE_MAGIC)) == _ARROW_FILE_MAGIC
            frames.append(pl.read_ipc(name) if is_file_format
                          else pl.read_ipc_stream(name))
        except Exception as error:  # polars raises several unrelated types for bad files
            raise InputError(f"cannot read Arrow file: {error}", path=name) from None
    try:
        return pl.concat(frames, how="diagonal_relaxed")
    except Exception as error:
        raise InputError(f"Arrow shards do not share their columns: {error}", path=path) from None
