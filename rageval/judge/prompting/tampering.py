"""Judged texts that address the judge, and judge reasoning copied from the judged texts.

Every judged text sits in its own escaped, nonce-tagged slot and the judge is told that
instructions inside slots are data (:mod:`rageval.judge.prompting.slots`), so a forged delimiter
cannot end its slot. A judge may obey an injected instruction all the same (small local models
do), and a score it gives then measures the injection, not the answer. These rules do not change
a score; they flag it, so that a poisoned score is never silent:

``aimed_at_judge``
    A judged text (the answer, a context, the query or a reference: whichever the rubric shows
    the judge) matches one of :data:`AIMED_RULES`: an instruction to ignore the rubric or the
    instructions; a score demanded with a verb of giving; words addressed to a judge or
    evaluator; a verdict written as a JSON reply (``"score":``, ``"reasoning":``); a forged slot
    tag, a chat template's role marker or a line claiming to be the system.
``reasoning_copied``
    Half or more of the words of the judge's reasoning lie in runs of
    :data:`COPIED_RUN` or more words found verbatim in one judged text, and the copied words
    name both a thing graded (``answer``, ``context``, ``question``, ``rubric``, ...) and a
    verdict on it (``score``, ``supported``, ``faithful``, ``correct``, ...): the judge
    repeated a verdict it was handed. A judge that only echoes the answer's own facts (small
    models do) is not flagged, even where those facts use the same words ("the final score
    was 6-1").

The rules read text only: they are deterministic, cost microseconds per record and need no
model. Their false-positive rates, measured on the demo and on a set of ordinary answers that
use the rules' words in their ordinary senses, are in docs/judge-flags.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["AIMED", "AIMED_RULES", "COPIED", "COPIED_RUN", "Flag", "add_flags",
           "aimed_at_judge", "reasoning_copied"]

AIMED = "aimed_at_judge"
COPIED = "reasoning_copied"

#: The shortest run of words, shared verbatim by a reasoning and a judged text, that counts as
#: copied.
COPIED_RUN = 6

_I = re.IGNORECASE
_ROLE = r"(?:judge|evaluator|grader|assessor|rater|reviewer|scorer)"
_SCORE_WORD = r"(?:score|rating|grade|mark|points?)s?"
_NUMBER = r"(?:\d+(?:\.\d+)?|one|two|three|four|five|ten|full marks)"

#: (what it finds, pattern), in the order they are tried; the first match is reported.
AIMED_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an instruction to ignore the rubric or instructions", re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass)\b(?:\W+\w+){0,5}?\W+"
        r"(?:instructions?|rubrics?|rules|guidelines|criteri(?:a|on)|prompts?|"
        r"system message)\b", _I)),
    ("a score demanded of the judge", re.compile(
        r"\b(?:give|assign|award|output|return|print|respond with|reply with|rate)\b"
        r"(?:\W+\w+){0,4}?\W+" + _SCORE_WORD + r"(?:\W+(?:of|as|=|:))?\W+" + _NUMBER + r"\b"
        r"|\b(?:give|assign|award|output|return)\b(?:\W+\w+){0,3}?\W+"
        r"(?:the\s+)?(?:highest|maximum|perfect|top|full)\s+(?:possible\s+)?"
        + _SCORE_WORD
        + r"|\b(?:rate|grade|score)\s+(?:this|my|the)\s+(?:answer|response|reply|context|"
        r"passage|summary)\s+(?:a\s+|as\s+)?\d", _I)),
    ("words addressed to the judge", re.compile(
        r"\b(?:dear|attention|hey|note to(?: the)?|message to(?: the)?|instructions? "
        r"(?:to|for)(?: the)?)\s+(?:ai\s+|llm\s+)?" + _ROLE + r"\b"
        r"|\byou are (?:an?|the) (?:ai |llm |impartial |careful )*" + _ROLE + r"\b"
        r"|\bas (?:an?|the) (?:ai |llm )" + _ROLE + r"\b", _I)),
    ("a verdict written as a judge's JSON reply", re.compile(
        r"[\"'](?:score|reasoning|verdicts?|grade|rating)[\"']\s*:", _I)),
    ("a forged slot tag, role marker or system line", re.compile(
        r"</?[A-Za-z_]+-[0-9a-f]{6,}\b"  # rageval's own slot tags
        r"|</(?:answer|contexts?|query|question|reference|document|input|data|text|slot)>"
        r"|<\|(?:im_start|im_end|system|user|assistant|eot_id|start_header_id|end_header_id)"
        r"\|?>|\[/?INST\]|<</?SYS>>"
        r"|^[ \t#*>]*(?:system|developer)\s*(?:message|prompt|override|note)?\s*:"
        r"|\b(?:system|developer) (?:override|instruction)s?\b", _I | re.MULTILINE)),
)

# Copied reasoning that names what is graded and a verdict on it repeats a verdict it was
# handed; an echo of the answer's own facts ("the final score was 6-1") names no graded thing.
_GRADED = frozenset({
    "answer", "answers", "response", "reply", "context", "contexts", "passage", "question",
    "query", "reference", "rubric", "criterion", "criteria", "evaluator", "judge",
})
_VERDICT = frozenset({
    "score", "scored", "rating", "grade", "faithful", "faithfulness", "unfaithful",
    "supported", "unsupported", "grounded", "relevant", "relevance", "irrelevant", "correct",
    "correctness", "incorrect", "accurate", "accuracy", "complete", "completeness",
    "hallucination", "hallucinated", "perfect", "flawless", "excellent",
})
_WORD = re.compile(r"\w+")
_EXCERPT = 80


@dataclass(frozen=True)
class Flag:
    """One flag on a judged item: its name and what triggered it, in words."""

    name: str
    why: str


def aimed_at_judge(texts: Mapping[str, Iterable[str]]) -> Flag | None:
    """The first rule of :data:`AIMED_RULES` a judged text matches (``texts``: the judged
    texts by the input that holds them, e.g. ``{"answer": [...]}``), or None."""
    for name, values in texts.items():
        for text in values:
            found = _aimed(text)
            if found is not None:
                return Flag(AIMED, f"{name}: {found}")
    return None


# Every rule needs one of these words (its verb, its score word, its role word, a JSON key, a
# role line's "system") or a tag's "<" or "[INST]": a text holding none (most texts) skips the
# regexes, which cost far more than a look at its words.
_TRIGGER_WORDS = frozenset({
    "ignore", "disregard", "forget", "override", "bypass", "score", "scores", "rating",
    "ratings", "grade", "grades", "mark", "marks", "point", "points", "rate", "judge",
    "evaluator", "grader", "assessor", "rater", "reviewer", "scorer", "reasoning", "verdict",
    "verdicts", "system", "developer",
})


# What each rule of AIMED_RULES needs of a text (read from its regex: the whole words, as
# lowercased tokens, and the characters every match holds), checked on its distinct words and
# its lowercased text: a text without them skips the rule's regex. Exact on ASCII text, where
# the rules' case-blind matching is lower() letter for letter.
def _set(*words: str) -> frozenset[str]:
    return frozenset(words)


_IGNORE = _set("ignore", "disregard", "forget", "override", "bypass")
_IGNORED = _set("instruction", "instructions", "rubric", "rubrics", "rules", "guidelines",
                "criteria", "criterion", "prompt", "prompts", "system")
_GIVE = _set("give", "assign", "award", "output", "return", "print", "respond", "reply", "rate")
_GIVE_TOP = _set("give", "assign", "award", "output", "return")
_SCORE_WORDS = _set("score", "scores", "rating", "ratings", "grade", "grades", "mark", "marks",
                    "point", "points", "pointss")
_TOP = _set("highest", "maximum", "perfect", "top", "full")
_RATE = _set("rate", "grade", "score")
_RATED = _set("answer", "response", "reply", "context", "passage", "summary")
_ROLES = _set("judge", "evaluator", "grader", "assessor", "rater", "reviewer", "scorer")
_VERDICT_KEYS = _set("score", "reasoning", "verdict", "verdicts", "grade", "rating")
# The numbers a demanded score is given in (a digit aside), the words a rating of "this
# answer" names it with, the words that address a judge.
_NUMBERS = _set("one", "two", "three", "four", "five", "ten", "full")
_THIS = _set("this", "my", "the")
_ADDRESS = _set("dear", "attention", "hey", "note", "message", "instruction", "instructions")
_AI = _set("ai", "llm")
_DIGIT = re.compile(r"[0-9]")


def _has(words: frozenset[str], wanted: frozenset[str]) -> bool:
    return not words.isdisjoint(wanted)


def _addressed(words: frozenset[str]) -> bool:
    """Words a text addressing a judge holds besides the judge's name (see the rule)."""
    return (_has(words, _ADDRESS) or ("you" in words and "are" in words)
            or ("as" in words and _has(words, _AI)))


def _system_line(low: str) -> bool:
    """What a forged system line holds: a colon after its name, or an override or
    instruction."""
    return ((":" in low or "override" in low or "instruction" in low)
            and ("system" in low or "developer" in low))


_RULE_NEEDS: tuple[Callable[[str, frozenset[str]], bool], ...] = (
    lambda low, words: _has(words, _IGNORE) and _has(words, _IGNORED),
    lambda low, words: ((_has(words, _GIVE) and _has(words, _SCORE_WORDS)
                         and (_has(words, _NUMBERS) or _DIGIT.search(low) is not None))
                        or (_has(words, _GIVE_TOP) and _has(words, _TOP))
                        or (_has(words, _RATE) and _has(words, _RATED) and _has(words, _THIS)
                            and _DIGIT.search(low) is not None)),
    lambda low, words: _has(words, _ROLES) and _addressed(words),
    lambda low, words: ":" in low and _has(words, _VERDICT_KEYS),
    lambda low, words: "<" in low or "[" in low or _system_line(low),
)


# Pieces of the trigger words, each word holding one: a text none of them is part of (most
# texts) holds no trigger word, which a look for each piece tells far more cheaply than the
# text's words (its tokens are only read when a piece is there).
_TRIGGER_PIECES = ("ignore", "disregard", "forget", "override", "bypass", "score", "rating",
                   "grade", "mark", "point", "rate", "judge", "evaluator", "assessor",
                   "reviewer", "reasoning", "verdict", "system", "developer")


# Room for the texts of a few thousand records: the rubrics of a run score a batch of records
# one after the other, and a text shown to several (the answer) is read by the first alone.
@functools.lru_cache(maxsize=16384)
def _aimed(text: str) -> str | None:
    """The first rule ``text`` matches and its excerpt, in words; None when none does. A
    text is read once however many rubrics show it (a context retrieved for many queries, an
    answer judged by several rubrics)."""
    low = text.lower()
    if "<" not in text and "inst]" not in low and not _any_in(_TRIGGER_PIECES, low):
        return None
    words = _word_set(text)
    if "<" not in text and "inst]" not in low and _TRIGGER_WORDS.isdisjoint(words):
        return None
    plain = text.isascii()
    for (what, pattern), needs in zip(AIMED_RULES, _RULE_NEEDS, strict=True):
        if plain and not needs(low, words):
            continue  # the rule cannot match: skipping it leaves the first match the same
        match = pattern.search(text)
        if match is not None:
            return f"{what}: {_excerpt(text, match)!r}"
    return None


def reasoning_copied(reasoning: str | None,
                     texts: Mapping[str, Sequence[str]]) -> Flag | None:
    """A flag when ``reasoning`` is mostly copied from one judged text and the copied words
    name a graded thing and a verdict (see the module's rules), or None."""
    words = _words(reasoning or "")
    if len(words) < COPIED_RUN:
        return None
    # The copied words must name a graded thing and a verdict: a reasoning naming neither
    # cannot qualify, whatever the texts hold.
    graded, verdicts = _named(words)
    if not (graded and verdicts):
        return None
    # Nor can texts none of which holds such words even as parts, all looked at at once (a
    # piece found in the joined texts lies in one of them: none holds the separator).
    joined = "\x00".join([text for values in texts.values() for text in values]).lower()
    if not (_any_in(graded, joined) and _any_in(verdicts, joined)):
        return None
    grams, counts = _runs(words)
    for name, values in texts.items():
        for text in values:
            # The copied words must name a graded thing and a verdict of the reasoning's: a
            # text of which neither is even a part cannot qualify (a look for a few words,
            # far cheaper than reading the text's words).
            low = text.lower()
            if not (_any_in(graded, low) and _any_in(verdicts, low)):
                continue
            # Copied words are words of the text: a text holding fewer than half of the
            # reasoning's cannot qualify, and most texts are ruled out so, far more cheaply
            # than by looking for runs.
            shared = _word_set(text).intersection(counts)
            if 2 * sum(counts[word] for word in shared) < len(words):
                continue
            covered = _covered(words, grams, _words(text))
            copied = {words[i] for i in covered}
            if 2 * len(covered) >= len(words) and copied & _GRADED and copied & _VERDICT:
                share = f"{len(covered)} of {len(words)} words"
                return Flag(COPIED, f"{share} of the reasoning are copied from the {name}")
    return None


def add_flags(details: dict[str, Any], flags: Iterable[Flag | None]) -> None:
    """Put ``flags`` (None: not raised) in an item's ``details``: their names under ``flags``
    (what the summary counts), the first reason of each under ``flag_reasons``."""
    reasons: dict[str, str] = {}
    for flag in flags:
        if flag is not None:
            reasons.setdefault(flag.name, flag.why)
    if reasons:
        details["flags"] = sorted(reasons)
        details["flag_reasons"] = reasons


@functools.lru_cache(maxsize=1024)
def _words(text: str) -> tuple[str, ...]:
    """The words of ``text``, lowercased (read once however many replies a text meets)."""
    return tuple(_word_list(text))


# An ASCII text's words are its runs of letters, digits and "_" (what \w matches there): every
# other byte made a space, a split finds them several times faster than the regex.
_ASCII_GAPS = bytes(c if (chr(c).isalnum() and c < 128) or c == ord("_") else ord(" ")
                    for c in range(256))


def _word_list(text: str) -> list[str]:
    """``_WORD.findall(text.lower())``: the words of ``text``, lowercased, in order."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_GAPS).decode("ascii").lower().split()
    return _WORD.findall(text.lower())


@functools.lru_cache(maxsize=256)
def _runs(words: tuple[str, ...]) -> tuple[dict[tuple[str, ...], int], dict[str, int]]:
    """Each run of :data:`COPIED_RUN` words of a reasoning by its start (the first), and how
    often each word occurs in it (read once however many replies give the same reasoning)."""
    grams = {words[i:i + COPIED_RUN]: i for i in range(len(words) - COPIED_RUN + 1)}
    counts: dict[str, int] = {}
    for word in words:
        counts[word] = counts.get(word, 0) + 1
    return grams, counts


@functools.lru_cache(maxsize=256)
def _named(words: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The words of a reasoning naming a graded thing, and those naming a verdict."""
    return tuple(sorted(_GRADED.intersection(words))), tuple(sorted(_VERDICT.intersection(words)))


def _any_in(pieces: tuple[str, ...], text: str) -> bool:
    """Whether one of ``pieces`` is part of ``text``."""
    # A loop, not any() over a generator: this runs for every judged text, and the
    # generator costs more than the looks.
    for piece in pieces:  # noqa: SIM110
        if piece in text:
            return True
    return False


@functools.lru_cache(maxsize=2048)
def _word_set(text: str) -> frozenset[str]:
    """The distinct words of ``text``, lowercased (what both rules read of most texts: read
    once however many replies a text meets)."""
    return frozenset(_word_list(text))


def _covered(words: tuple[str, ...], grams: dict[tuple[str, ...], int],
             text: tuple[str, ...]) -> set[int]:
    """The positions of ``words`` inside runs of :data:`COPIED_RUN` or more words that
    ``text`` holds too (``grams``: each run start of ``words`` by its words)."""
    covered: set[int] = set()
    for i in range(len(text) - COPIED_RUN + 1):
        start = grams.get(tuple(text[i:i + COPIED_RUN]))
        if start is not None:
            covered.update(range(start, start + COPIED_RUN))
    return covered


def _excerpt(text: str, match: re.Match[str]) -> str:
    """The matched words and up to three words either side, at most :data:`_EXCERPT`
    characters, on one line."""
    before = re.search(r"(?:\S+\s+){0,3}$", text[:match.start()])
    after = re.match(r"(?:\s*\S+){0,3}", text[match.end():])
    start = match.start() - (len(before.group()) if before else 0)
    end = match.end() + (len(after.group()) if after else 0)
    piece = " ".join(text[start:end].split())
    return piece if len(piece) <= _EXCERPT else piece[:_EXCERPT - 1] + "…"
