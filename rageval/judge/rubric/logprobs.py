"""G-Eval style scores: the expected score under the judge's own distribution over scores.

With ``--judge-logprobs`` the judge is asked for the top log-probabilities of every reply token.
The token that carries the score in ``{"reasoning": ..., "score": 4}`` is located in the reply,
and its alternatives that are valid scores of the rubric give a distribution; the value is
``sum(p(s) * s) / sum(p(s))`` over those scores (the probability mass on tokens that are not
scores is left out, which is the renormalisation G-Eval uses). A reply whose score token cannot
be found, or whose alternatives hold no valid score, gets no value: never the reply's integer
score in its place, which would silently mix two different measures.

Log-probabilities are stored compactly as ``[[token, logprob, [[alternative, logprob], ...]],
...]`` (see :func:`rageval.judge.llm.transport.sdk.compact_logprobs`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rageval.judge.rubric.rubrics import Rubric

__all__ = ["ExpectedScore", "expected_score"]

# The value of a "score" key: its first digit is where the score token starts.
_SCORE_VALUE = re.compile(r'"score"\s*:\s*"?\s*([+-]?\d)')


@dataclass(frozen=True, slots=True)
class ExpectedScore:
    """The expected score and the distribution it came from, or why there is none."""

    value: float | None
    distribution: dict[int, float]
    error: str | None = None


def expected_score(logprobs: list[list[Any]] | None, rubric: Rubric,
                   score: int | None = None) -> ExpectedScore:
    """The probability-weighted score at the reply's score token (see the module docstring).

    The score token is that of the verdict the reply was scored from: the first ``"score"``
    whose value is ``score`` when it is given (the parser reads the first verdict object),
    else the first ``"score"`` in the reply.
    """
    if not logprobs:
        return ExpectedScore(None, {}, "the reply has no log-probabilities")
    tokens = [str(item[0]) for item in logprobs]
    text = "".join(tokens)
    matches = list(_SCORE_VALUE.finditer(text))
    if not matches:
        return ExpectedScore(None, {}, "no score token in the reply's log-probabilities")
    chosen = next((m for m in matches if score is not None and _value_at(text, m) == score),
                  matches[0])
    digit_at = chosen.start(1)
    if text[digit_at] in "+-":
        digit_at += 1
    position, start = _token_at(tokens, digit_at)
    token = tokens[position]
    prefix = token[: digit_at - start]
    chosen_rest = token[digit_at - start :]
    probabilities: dict[int, float] = {}
    for alternative, logprob in _alternatives(logprobs[position]):
        if not alternative.startswith(prefix):
            continue
        score = _leading_score(alternative[len(prefix) :], rubric)
        if score is not None and math.isfinite(logprob):
            probabilities[score] = probabilities.get(score, 0.0) + math.exp(logprob)
    if not probabilities:
        shown = chosen_rest.strip() or token
        return ExpectedScore(None, {}, f"no valid score among the alternatives of token {shown!r}")
    total = sum(probabilities.values())
    distribution = {s: p / total for s, p in sorted(probabilities.items())}
    value = sum(s * p for s, p in distribution.items())
    return ExpectedScore(value, distribution)


def _value_at(text: str, match: re.Match[str]) -> int | None:
    number = re.match(r"[+-]?\d+", text[match.start(1):])
    return int(number.group(0)) if number else None


def _token_at(tokens: list[str], offset: int) -> tuple[int, int]:
    """The index of the token covering character ``offset`` and where that token starts."""
    start = 0
    for index, token in enumerate(tokens):
        if start <= offset < start + len(token):
            return index, start
        start += len(token)
    raise ValueError(f"offset {offset} beyond the reply")  # unreachable: offset is in the text


def _alternatives(item: list[Any]) -> list[tuple[str, float]]:
    """The top alternatives of one token, the chosen token included (some endpoints omit it)."""
    chosen = (str(item[0]), float(item[1]))
    alternatives = [(str(a), float(lp)) for a, lp in (item[2] if len(item) > 2 else [])]
    if all(a != chosen[0] for a, _ in alternatives):
        alternatives.append(chosen)
    return alternatives


def _leading_score(text: str, rubric: Rubric) -> int | None:
    """The score an alternative token stands for: its digits, when they end the number there.

    ``"4"``, ``"4,"`` and ``"4}"`` are 4; ``"45"`` is no score of a 1-5 scale; on a 0-10 scale
    ``"10"`` is 10 while ``"1"`` followed by another token is ambiguous and still read as 1, as
    the reply's own token would be.
    """
    match = re.match(r"\s*(\d+)", text)
    if match is None:
        return None
    score = int(match.group(1))
    return score if rubric.scale_min <= score <= rubric.scale_max else None
