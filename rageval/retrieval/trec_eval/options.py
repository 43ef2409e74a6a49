"""trec_eval's command-line options, and the start of reading a run in slices.

Kept apart from :mod:`.evaluation` and light to import (the TREC readers only, none of the
measures): ``rageval trec-eval`` starts reading and parsing its run with :func:`start_slices`
and loads the evaluation's modules while the first slices are read.
"""

from __future__ import annotations

from dataclasses import dataclass

from rageval.retrieval.trec.chunked_read import DEFAULT_CHUNK_BYTES, NotStreamable, RunSlices


@dataclass(frozen=True)
class Options:
    """trec_eval's command-line options (see :data:`~.command.HELP`)."""

    query_flag: bool = False
    summary_flag: bool = True
    all_queries: bool = False
    judged_only: bool = False
    rel_level: int = 1
    max_retrieved: int | None = None
    num_docs: int = 0
    only_qid: str | None = None
    rel_format: str = "qrels"  # or "qrels_jg" (-R)
    zscores_path: str | None = None  # -Z
    # Read what trec_eval 10.0 reads (numbers as C's atof/atol, its qrels comment and blank-line
    # rules) and stop where it stops (exit 4: a qrels topic without results, a document listed
    # twice, a first topic judged all below 0). False reads strictly and skips topics without
    # results, as trec_eval 9 and pytrec_eval do.
    like_trec_eval_10: bool = True
    # Size of the slices a run written topic by topic is read in (see start_slices); 0 reads
    # the whole file at once.
    chunk_bytes: int = DEFAULT_CHUNK_BYTES


def start_slices(run_path: str, opts: Options) -> RunSlices | None:
    """The run's slices, the first already being read and parsed in worker threads (while the
    caller loads modules and reads the qrels), or None where the run is not to be read in
    slices. The caller iterates the slices or closes them."""
    if opts.rel_format != "qrels" or opts.only_qid is not None or opts.chunk_bytes <= 0:
        return None
    slices = RunSlices(run_path, opts.chunk_bytes)
    try:
        slices.start()
    except (NotStreamable, OSError):
        return None  # the whole-file readers report it, in trec_eval's order
    return slices
