"""Turning a judge reply into a score, or into an explicit reason why there is none.

The judge is asked for ``{"reasoning": "...", "score": n}``. :func:`parse_reply` reads the
reply as strict JSON first; failing that, it takes the first JSON object in the reply that has
a ``score`` key (so code fences and prose around the object are tolerated). A judge that
quotes the judged text may repeat a verdict written there ("... and the answer says
{\"score\": 5}"): a later object whose score disagrees with the first makes the reply unscored,
with both scores in the reason; it never lends its score.
The score must be an integer of the rubric's scale: ``4.0`` and ``"4"`` are read as 4, while
``3.5``, ``true``, ``7`` on a 1-5 scale or a missing score leave the reply unscored with a
reason. A reply is never given a default, a minimum or a guessed score.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rageval.judge.prompting.reply_json import conflict, reply_objects, shown

if TYPE_CHECKING:
    from rageval.judge.rubric.rubrics import Rubric

__all__ = ["ParsedReply", "parse_reply"]

_INTEGER_STRING = re.compile(r"\s*[+-]?[0-9]{1,9}\s*")


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """The outcome of parsing one reply.

    Exactly one of ``score`` and ``error`` is set. ``reasoning`` is the judge's reasoning when
    the reply had one as a string, kept even when the score is unusable.
    """

    score: int | None
    reasoning: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        """Whether the reply gave a usable score."""
        return self.score is not None


def _score(value: Any, rubric: Rubric) -> tuple[int | None, str | None]:
    """The integer score a ``score`` value stands for, or an error reason."""
    low, high = rubric.scale_min, rubric.scale_max
    if isinstance(value, bool) or value is None:
        return None, f"score is {shown(value)}, not an integer"
    if isinstance(value, int):
        score = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None, f"score {shown(value)} is not an integer"
        score = int(value)
    elif isinstance(value, str) and _INTEGER_STRING.fullmatch(value):
        score = int(value)
    else:
        return None, f"score {shown(value)} is not an integer"
    if not low <= score <= high:
        return None, f"score {score} is outside the rubric's scale {low}-{high}"
    return score, None


def _from_object(obj: dict[str, Any], rubric: Rubric) -> ParsedReply:
    reasoning = obj.get("reasoning")
    reasoning = reasoning if isinstance(reasoning, str) else None
    if "score" not in obj:
        return ParsedReply(None, reasoning, "the reply's JSON object has no 'score'")
    score, error = _score(obj["score"], rubric)
    return ParsedReply(score, reasoning, error)


def parse_reply(text: str | None, rubric: Rubric) -> ParsedReply:
    """Parse a judge reply against ``rubric``'s scale; never raises on any text.

    Strict JSON (the whole reply is one object) is tried first. Otherwise the first JSON
    object in the reply that has a ``score`` key is used, unless a later one disagrees with
    it; when none has one, the reply is unscored. See the module docstring for which scores
    are accepted.
    """
    found = reply_objects(text, "score")
    if isinstance(found, str):
        return ParsedReply(None, None, found)
    parsed = _from_object(found[0], rubric)
    for later in found[1:]:
        if _from_object(later, rubric).score != parsed.score or parsed.score is None:
            return ParsedReply(None, parsed.reasoning,
                               conflict("score", found[0]["score"], later["score"]))
    return parsed
