"""Reading TREC qrels and run files.

Reading is columnar (polars' CSV reader) so a 10M-line run parses in about a second. The fast
path handles the common layouts (single spaces, or single tabs with padded fields); any file it
cannot prove well-formed is re-read by an exact line-by-line parser, which is also where every
error message with a line number comes from.
"""

from __future__ import annotations

import os
from typing import Any

import polars as pl

from rageval.core.errors import InputError
from rageval.retrieval.trec.exact_read import exact_qrels, exact_run
from rageval.retrieval.trec.fast_read import fast_qrels, fast_run
from rageval.retrieval.trec.frames import PathLike, Qrels, Run


def read_qrels(path: PathLike, *, like_trec_eval: bool = False) -> Qrels:
    """Read a TREC qrels file (``qid iter docno rel``).

    Raises :class:`InputError` for a missing/unreadable file, a line that does not have
    exactly four fields, a non-integer grade, or a file without any judgment.
    ``like_trec_eval`` reads what trec_eval 10.0 reads instead: a grade is the integer its
    field starts with, as C's atol reads it (with an :class:`InputWarning` when that is not
    the whole field), a blank line is an error, and comments follow its reader's rule (see
    :mod:`~rageval.retrieval.trec.exact_read`).
    """
    name = _check_readable(path)
    frame = fast_qrels(name, like_trec_eval)
    if frame is None:
        frame = exact_qrels(name, like_trec_eval)
    if frame.height == 0:
        raise InputError("no relevance judgments found", path=name)
    return Qrels(frame=frame, path=name)


def read_qrels_jg(path: PathLike) -> Qrels:
    """Read a trec_eval ``qrels_jg`` file (``qid jg docno rel``: judgments by judgment group,
    e.g. one group per assessor) as trec_eval 10.0 reads it (see ``like_trec_eval`` of
    :func:`read_qrels`). The frame has a ``jg`` column besides ``qid``, ``docno`` and ``rel``.

    Raises :class:`InputError` as :func:`read_qrels` does, and for a document judged twice
    in the same group of a topic (trec_eval stops there, with exit status 2).
    """
    name = _check_readable(path)
    frame = exact_qrels(name, like_trec_eval=True, groups=True)
    if frame.height == 0:
        raise InputError("no relevance judgments found", path=name)
    twice = frame.filter(pl.struct("qid", "jg", "docno").is_duplicated())
    if twice.height:
        qid, jg, docno = twice.row(0)[:3]
        raise InputError(f"topic '{qid}' judgment group '{jg}' judges document '{docno}' "
                         "twice (trec_eval 10.0 stops reading there)", path=name)
    return Qrels(frame=frame, path=name)


def read_run(path: PathLike, *, like_trec_eval: bool = False) -> Run:
    """Read a TREC run file (``qid Q0 docno rank score runid``).

    Raises :class:`InputError` for a missing/unreadable file, a line with fewer than six
    fields, a score that is not a number, or a file without any result line. A NaN score is
    refused either way (it has no place in a ranking). ``like_trec_eval`` reads a score as C's
    atof reads it, as trec_eval does: the number the field starts with, 0 if none (with an
    :class:`InputWarning` when that is not the whole field).
    """
    name = _check_readable(path)
    cache: dict[str, Any] = {}
    result = fast_run(name, cache)
    if result is None:
        cache.clear()
        result = exact_run(name, like_trec_eval)
    frame, runid = result
    if frame.height == 0:
        raise InputError("no results found", path=name)
    return Run(frame=frame, runid=runid, path=name, _cache=cache)


def _check_readable(path: PathLike) -> str:
    name = os.fspath(path)
    if not os.path.exists(name):
        raise InputError("file not found", path=name)
    if os.path.isdir(name):
        raise InputError("is a directory, not a file", path=name)
    if not os.access(name, os.R_OK):
        raise InputError("file is not readable", path=name)
    return name
