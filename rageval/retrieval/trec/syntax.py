"""The TREC qrels and run line formats, as trec_eval reads them.

Formats (fields separated by any run of ASCII whitespace, as trec_eval splits them):

* qrels: ``qid iter docno rel`` -- ``iter`` is ignored, ``rel`` is an integer grade (negative
  grades mean "in the pool but not judged", trec_eval's convention for sampled pools).
* run: ``qid Q0 docno rank score runid [ignored ...]`` -- the rank column is ignored (trec_eval
  re-ranks by score), the score is read as a float64, anything after ``runid`` is ignored and
  the run's name is the ``runid`` of its last line.

Lines whose first non-blank character is ``#`` are comments and blank lines are skipped in both
files. Any other malformed line raises :class:`rageval.core.errors.InputError` naming the file, the
1-based line and the field.
"""

from __future__ import annotations

import re

# C's isspace() in the "C" locale, which is what trec_eval splits fields on.
WHITESPACE = " \t\n\x0b\x0c\r"
INT_RE = re.compile(rb"[+-]?[0-9]+")
FLOAT_RE = re.compile(
    rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.IGNORECASE,
)

RUN_COLUMNS = ("qid", "iter", "docno", "rank", "score", "runid")
QRELS_COLUMNS = ("qid", "iter", "docno", "rel", "extra")  # "extra" must stay empty
