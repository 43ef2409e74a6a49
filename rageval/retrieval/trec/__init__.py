"""TREC qrels and run files, read and written.

- :mod:`.syntax`: the two line formats, as trec_eval splits and parses them;
- :mod:`.frames`: the parsed files, :class:`Qrels` and :class:`Run`;
- :mod:`.read`: :func:`read_qrels` and :func:`read_run`, which try the fast path first, and
  :func:`read_qrels_jg` (trec_eval's judgment groups);
- :mod:`.fast_read`: the columnar fast path (polars' CSV reader);
- :mod:`.chunked_read`: a run read a slice of whole topics at a time (bounded memory), which
  trec-eval evaluates slice by slice;
- :mod:`.exact_read`: the exact line-by-line parser, source of every error's line number;
- :mod:`.write`: :func:`write_run`.
"""

from rageval.retrieval.trec.exact_read import locate_line
from rageval.retrieval.trec.frames import QidLayout, Qrels, Run
from rageval.retrieval.trec.read import read_qrels, read_qrels_jg, read_run
from rageval.retrieval.trec.write import write_run

__all__ = [
    "QidLayout",
    "Qrels",
    "Run",
    "locate_line",
    "read_qrels",
    "read_qrels_jg",
    "read_run",
    "write_run",
]
