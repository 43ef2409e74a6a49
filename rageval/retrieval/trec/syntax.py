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

import math
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

# The longest prefix of a token that C's strtod reads in the "C" locale: a decimal or
# hexadecimal number, inf[inity] or nan[(chars)]. trec_eval reads scores with atof and grades
# with atol, which take such a prefix and ignore the rest (0 when there is none).
_C_FLOAT_PREFIX = re.compile(
    rb"[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    rb"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    rb"|inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)",
    re.IGNORECASE,
)
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def c_atof(token: bytes) -> tuple[float, bool]:
    """C's ``atof(token)``, and whether it read the whole token (else it read a prefix, or
    nothing and returned 0.0)."""
    match = _C_FLOAT_PREFIX.match(token)
    if match is None:
        return 0.0, False
    text = match.group().decode("ascii")
    body = text.lstrip("+-").lower()
    if body.startswith("nan"):
        value = math.nan
    elif body.startswith("0x"):
        try:
            value = float.fromhex(text)
        except OverflowError:  # strtod gives HUGE_VAL
            value = math.copysign(math.inf, -1.0 if text.startswith("-") else 1.0)
    else:
        value = float(text)
    return value, match.end() == len(token)


def c_atol(token: bytes) -> tuple[int, bool]:
    """C's ``atol(token)`` (glibc: strtol, clamped to the range of a long), and whether it read
    the whole token."""
    match = INT_RE.match(token)
    if match is None:
        return 0, False
    value = min(max(int(match.group()), _LONG_MIN), _LONG_MAX)
    return value, match.end() == len(token)
