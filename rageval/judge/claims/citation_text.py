"""Reading an answer into statements and the contexts each statement cites.

A statement is a sentence of the answer, as nltk's Punkt splits it. A citation is a bracket
group ``[...]`` whose comma- or semicolon-separated tokens are each either a context id of the
record (exact match: ``[d3]``, ``[d3, d7]``) or a positive integer n naming the record's n-th
context (1-based rank: ``[1]``, ``[1][2]``, ``[1, 2]``). Ids are tried first, so a record whose
ids are numbers is cited by id. An integer that names no context (``[0]``, or past the last
context) is an invalid citation. A group with any other token (``[sic]``, ``[citation
needed]``, ``[a, b]`` when a and b are not ids) is not a citation at all and stays in the text.

Punkt puts a marker written after the full stop ("in 1998. [1] It ...") at the start of the
next sentence; here leading markers of a sentence go back to the sentence before it, and a
sentence left with no letter or digit (only markers and punctuation) joins the one before.

Departures from ALCE (princeton-nlp/ALCE, ``eval.py`` ``compute_autoais`` and ``utils.py``
``remove_citations``):

* ALCE reads only ``[n`` prefixes: ``[1, 2]`` cites passage 1 alone and ids such as ``[d3]``
  are not citations; rageval reads every token of the group, ranks and ids.
* ALCE's ``[0]`` becomes Python index -1 and silently cites the last passage; here it is an
  invalid citation.
* ALCE counts a passage cited twice twice (in the cap, the precision denominator and the
  precision checks); here a statement cites each passage once, in order of first appearance,
  and the cap of ``max_citations`` applies after that de-duplication. As in ALCE, an invalid
  token anywhere in the statement counts, even one beyond the cap.
* ALCE splits with nltk's trained English Punkt model; rageval uses an untrained
  ``PunktSentenceTokenizer`` (it needs no downloaded data), which knows no abbreviations, so
  "Dr." or "e.g." may end a statement.
* ALCE takes Punkt's sentences as they are, so a marker that follows a full stop cites for
  the next sentence (and a sentence of markers only is judged with an empty text); here it
  stays with the sentence it follows.
* ALCE's ``remove_citations`` drops " |" and every "]" of the sentence, and leaves ", 2" of
  "[1, 2]"; here exactly the citation groups (and the whitespace before them) are removed.
* ALCE's ``eval.py`` keeps only the first line of the answer; here the whole answer is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from nltk.tokenize.punkt import PunktSentenceTokenizer

__all__ = ["Statement", "read_citations", "split_statements"]

# No bracket inside: nested groups are read from the inside out, one pass at a time.
_GROUP = re.compile(r"\[([^\[\]]*)\]")
_GROUP_WITH_SPACE = re.compile(r"\s*\[([^\[\]]*)\]")
_TOKEN_SEPARATOR = re.compile(r"[,;]")
_INTEGER = re.compile(r"[0-9]+")  # ASCII only: int() would also read other scripts' digits

# A resolved token: (context id, None) when valid, (None, token as written) when invalid.
_Token = tuple[str | None, str | None]
_Parser = Callable[[str], list[_Token] | None]


@dataclass(frozen=True)
class Statement:
    """One statement of an answer: its text without citation markers (stripped at the edges),
    the context ids it validly cites (first appearance order, once each, at most
    ``max_citations``) and the tokens of its citations that name no context."""

    text: str
    cites: tuple[str, ...]
    invalid: tuple[str, ...]


@cache
def _tokenizer() -> PunktSentenceTokenizer:
    # Untrained on purpose: the trained model is downloaded data, absent offline and in CI.
    return PunktSentenceTokenizer()


def _group_parser(context_ids: Sequence[str]) -> _Parser:
    """A function reading the inside of a bracket group: its resolved tokens, or None when the
    group is not a citation."""
    ids = list(context_ids)
    known = set(ids)

    def parse(inside: str) -> list[_Token] | None:
        tokens: list[_Token] = []
        for raw in _TOKEN_SEPARATOR.split(inside):
            token = raw.strip()
            if token and token in known:
                tokens.append((token, None))
            elif _INTEGER.fullmatch(token):
                rank = int(token)
                tokens.append((ids[rank - 1], None) if 1 <= rank <= len(ids) else (None, token))
            else:
                return None
        return tokens

    return parse


def _leading_markers_end(text: str, start: int, end: int, parse: _Parser) -> tuple[int, int]:
    """Where the citation markers opening ``text[start:end]`` end: (end of the last marker,
    start of what follows it after whitespace); (start, start) when there is none."""
    marker_end, pos = start, start
    while (match := _GROUP.match(text, pos, end)) and parse(match.group(1)) is not None:
        marker_end = pos = match.end()
        while pos < end and text[pos].isspace():
            pos += 1
    return marker_end, pos


def _spans(answer: str, parse: _Parser) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for start, end in _tokenizer().span_tokenize(answer):
        if spans:
            marker_end, rest = _leading_markers_end(answer, start, end, parse)
            if marker_end > start:
                spans[-1] = (spans[-1][0], marker_end)
                start = rest
            if not any(ch.isalnum() for ch in answer[start:end]):
                # Only markers and punctuation were here: all of it closes the statement before.
                if answer[start:end].strip():
                    spans[-1] = (spans[-1][0], end)
                continue
        if answer[start:end].strip():
            spans.append((start, end))
    return spans


def split_statements(answer: str, context_ids: Sequence[str] = ()) -> list[str]:
    """The answer's statements, citation markers still in them; [] for a blank answer.

    Without ``context_ids`` only numeric groups (``[1]``, ``[1, 2]``) count as markers when
    deciding which statement a marker after a full stop belongs to; with them, id groups too.
    """
    if not answer.strip():
        return []
    return [answer[start:end] for start, end in _spans(answer, _group_parser(context_ids))]


def _strip_markers(sentence: str, parse: _Parser) -> tuple[str, list[_Token]]:
    """The sentence without its citation groups (nor the whitespace before each) and the
    groups' tokens in reading order. Repeated until nothing changes, because removing an
    inner group can turn the brackets around it into a new group ("[[1]2]" -> "[2]")."""
    tokens: list[_Token] = []

    def drop(match: re.Match[str]) -> str:
        parsed = parse(match.group(1))
        if parsed is None:
            return match.group(0)
        tokens.extend(parsed)
        return ""

    while True:
        stripped = _GROUP_WITH_SPACE.sub(drop, sentence)
        if stripped == sentence:
            return sentence.strip(), tokens
        sentence = stripped


def _unique(values: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def read_citations(
    answer: str, context_ids: Sequence[str], max_citations: int | None = 3
) -> list[Statement]:
    """The answer's statements with their citations resolved against the record's contexts
    (ids in rank order). ``max_citations`` caps each statement's valid citations (ALCE's
    ``at_most_citations``, 3 by default there too); None keeps them all."""
    if max_citations is not None and max_citations < 1:
        raise ValueError(f"max_citations must be at least 1 or None, got {max_citations}")
    parse = _group_parser(context_ids)
    statements = []
    for sentence in split_statements(answer, context_ids):
        text, tokens = _strip_markers(sentence, parse)
        cites = _unique([ctx for ctx, _ in tokens if ctx is not None])
        invalid = _unique([bad for _, bad in tokens if bad is not None])
        statements.append(Statement(text, cites[:max_citations], invalid))
    return statements
