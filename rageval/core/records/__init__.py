"""Loading and validating evaluation records.

One *record* is one RAG interaction: a query, the contexts the retriever returned, the
generated answer, reference answers and (optionally) graded relevance judgments.

Record format
=============

JSON Lines (``.jsonl``, the primary format) holds one JSON object per line::

    {"id": "q1", "query": "What are the company's main revenue sources?",
     "contexts": [{"id": "d3", "text": "...", "score": 12.7}, {"id": "d9", "text": "..."}],
     "answer": "...", "reference": "...",
     "judgments": {"d3": 2, "d7": 1}}

Fields:

``id`` (required)
    A non-empty string; an integer is accepted and converted with ``str()``. Record ids are
    unique within a file.
``query``, ``answer``
    A string, or absent / ``null``.
``contexts``
    The retrieved contexts, in rank order: a list whose items are either plain strings (their
    ids are then their 1-based positions as strings: ``"1"``, ``"2"``, ...) or objects with a
    ``text`` (string, may be empty), an ``id`` (non-empty string, or an integer converted with
    ``str()``) and an optional ``score`` (a finite number). Any other key of a context object
    is kept in :attr:`Context.metadata`. Context ids are unique within a record. Absent or
    ``null`` means no contexts.
``reference``
    A reference answer (string) or a non-empty list of them; stored as
    :attr:`Record.references`.
``judgments``
    Graded relevance judgments (TREC qrels style): an object mapping a doc id to an integer
    grade (negative grades are allowed, as in TREC). An empty object ``{}`` means "judged,
    nothing relevant"; absent or ``null`` means "no judgments" (``None``).

``tool_calls``, ``reference_tool_calls``
    The tool calls the system made and those expected of it
    (:mod:`rageval.core.records.tools`).
``turns``
    Makes the record a conversation: each turn is a record of its own, ``<id>#<turn>``
    (:mod:`rageval.core.records.validation`).

Every other top-level key is kept, untouched, in :attr:`Record.extra`, but for
``contexts_without_text``, which only a reader of traces sets
(:data:`~rageval.core.records.model.CONTEXTS_WITHOUT_TEXT`): a file that sets it is refused.

Blank lines are skipped. Other formats carry the same fields:

* ``.json``: JSON Lines, or a single JSON array of record objects.
* ``.csv``: a header row naming the columns ``id`` (required), ``query``, ``answer``,
  ``reference``, ``contexts`` and ``judgments``; other columns go to ``extra`` as strings.
  ``contexts``, ``tool_calls``, ``reference_tool_calls`` and ``turns`` cells hold a JSON
  array, ``judgments`` cells a JSON object, and a
  ``reference`` cell is a plain string or, when it starts with ``[``, a JSON array of
  strings. An empty cell means the field is absent. Line numbers are physical lines of the
  file (the header is line 1).
* ``.parquet``: one row per record; list and struct columns map to the same fields (a
  ``judgments`` struct or map column, ``contexts`` as a list of strings or of structs). A
  null value means the field is absent. Errors report the 1-based row number as the line.

Every problem with the input raises :class:`~rageval.core.errors.InputError` naming the file, the
line and the field (a dotted path such as ``contexts[2].id`` or ``judgments.d3``; list
indices count from 0), before anything is scored.

The record model and its validation live in :mod:`rageval.core.records.model`, the readers of
each file format in :mod:`rageval.core.records.readers`; this module is the entry point.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rageval.core.errors import LARGEST_COUNT, UsageError, check_int
from rageval.core.progress import LoadProgress
from rageval.core.records.ids import IdCheck
from rageval.core.records.judgments import apply_judgments
from rageval.core.records.model import MAX_GRADE as MAX_GRADE  # public here before the split
from rageval.core.records.model import Context, Conversation, Record
from rageval.core.records.readers import (
    DEFAULT_MAX_LINE_BYTES,
    FORMATS,
    READERS,
    PathLike,
    file_error,
    resolve_format,
)
from rageval.core.records.tools import ToolCall
from rageval.core.records.validation import validate_records

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "FORMATS",
    "Context",
    "Conversation",
    "Record",
    "ToolCall",
    "apply_judgments",
    "iter_records",
    "iter_windows",
    "load_records",
    "record_objects",
    "record_windows",
    "records_from_dicts",
]


def iter_records(path: PathLike, *, format: str | None = None,
                 max_line_bytes: int | None = None,
                 progress: LoadProgress | None = None) -> Iterator[Record]:
    """Stream the records of a file, validating each one as it is read.

    The format comes from the extension (``.jsonl``, ``.json``, ``.csv``, ``.parquet``)
    unless ``format`` (one of :data:`FORMATS`) is given. A duplicate record id is refused at
    most a few thousand records after the stream reaches it, and before any later problem of
    the file (:func:`iter_windows` checks each window whole before handing it over); an
    unknown format or a missing file is reported at once, any
    other problem when the stream reaches it. Raises :class:`InputError`.

    A line longer than ``max_line_bytes`` (default :data:`DEFAULT_MAX_LINE_BYTES`) in a JSONL,
    CSV or line-delimited JSON file is an error; a JSON array file is read whole.

    ``progress`` (a :data:`~rageval.core.progress.LoadProgress`), when given, is called now and
    then (every megabyte or few thousand records, never per record) with how much of the file
    has been read and its size: bytes of a JSONL or CSV file, characters of a JSON array, rows
    of a Parquet file; the last call, once the file is read to its end, has both equal.
    """
    return _validated(path, format, max_line_bytes, progress)[0]


def _validated(path: PathLike, format: str | None, max_line_bytes: int | None,
               progress: LoadProgress | None) -> tuple[Iterator[Record], IdCheck]:
    """The validated records of a file, and their duplicate-id check (the file, its format
    and the line limit checked at once)."""
    objects, unit = record_objects(path, format=format, max_line_bytes=max_line_bytes,
                                   progress=progress)
    source = os.fspath(path)
    ids = IdCheck(source, unit)
    return validate_records(objects, source, unit, ids), ids


def record_objects(path: PathLike, *, format: str | None = None,
                   max_line_bytes: int | None = None, progress: LoadProgress | None = None,
                   ) -> tuple[Iterator[tuple[int, Any]], str]:
    """The decoded objects of a records file as ``(line, object)``, not yet validated, and
    what its errors call a line (``line``, or ``row`` for Parquet): for a reader that builds
    some records itself before :func:`~rageval.core.records.validation.validate_records`
    validates the rest (see :func:`iter_records` for the arguments)."""
    fmt = resolve_format(path, format)
    limit = DEFAULT_MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    check_int("max_line_bytes (--max-line-bytes)", limit, 1, high=LARGEST_COUNT)
    source = os.fspath(path)
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(source)
        os.stat(path)  # a missing or unreadable file is reported before iteration starts
    except OSError as error:
        raise file_error(error, source) from None
    return READERS[fmt](path, source, limit, progress), "row" if fmt == "parquet" else "line"


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects.

    Loading allocates millions of small containers, none of them in reference cycles; the
    collector's repeated passes over the growing heap would roughly double the load time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_records(path: PathLike, *, format: str | None = None,
                 max_line_bytes: int | None = None,
                 progress: LoadProgress | None = None) -> list[Record]:
    """Load and validate every record of a file (see :func:`iter_records`, also for
    ``progress``)."""
    records = iter_records(path, format=format, max_line_bytes=max_line_bytes,
                           progress=progress)
    with _gc_paused():
        return list(records)


def iter_windows(path: PathLike, size: int, *, format: str | None = None,
                 max_line_bytes: int | None = None,
                 progress: LoadProgress | None = None) -> Iterator[list[Record]]:
    """The records of a file in lists of at most ``size`` (see :func:`iter_records`), read one
    list at a time: a run scored window by window holds one window of records. A window comes
    out with every id in it checked against every earlier one."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise UsageError(f"the window size must be a positive integer, got {size!r}")
    records, ids = _validated(path, format, max_line_bytes, progress)
    return record_windows(records, ids, size)


def record_windows(records: Iterator[Record], ids: IdCheck,
                   size: int) -> Iterator[list[Record]]:
    """``records`` (validated by :func:`~rageval.core.records.model.validate_records` with
    ``ids``) in lists of at most ``size``, each with every id checked against every earlier
    one before it is handed over."""
    while True:
        with _gc_paused():
            window = list(itertools.islice(records, size))
        if not window:
            return
        ids.flush()  # every id of the window checked before anything of it is scored
        yield window
        window = []  # not held here while the next one is read


def records_from_dicts(
    items: Iterable[Mapping[str, Any]], *, source: str = "<memory>"
) -> list[Record]:
    """Validate records given as JSON-form mappings; errors name ``source`` and the item
    number (1-based) as the line."""
    with _gc_paused():
        return list(validate_records(enumerate(items, 1), source, "item"))

