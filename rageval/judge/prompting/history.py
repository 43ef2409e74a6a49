"""The conversation a judged turn belongs to, as judge prompts show it.

A turn of a conversation (:class:`~rageval.core.records.Record` with ``conversation``) is
judged with the turns before it: the user's messages, the tool calls made and the assistant's
answers, oldest first, each message in its own nonce-tagged slot like every untrusted text
(:mod:`rageval.judge.prompting.slots`). A record standing for a whole conversation (``turn``
0: the conversation-level rubrics) shows every turn.

``budget`` (characters, ``--judge-history-chars``) bounds the text shown: whole turns are left
out from the oldest until the rest fits, and the block says how many were. A record on its own,
or the first turn of a conversation, has no history, and its prompt is what it was before
conversations existed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rageval.core.records import Record
from rageval.judge.prompting.slots import slot

__all__ = ["History", "history_of"]

_BEFORE = "The conversation before this turn, oldest first{note}:"
_WHOLE = "The whole conversation, oldest turn first{note}:"


@dataclass(frozen=True)
class History:
    """The messages shown, as ``(turn, role, text)`` with role ``user``, ``tool_call`` or
    ``assistant``; how many earlier turns the budget left out; whether it is the whole
    conversation (a conversation-level rubric) or the turns before the one judged."""

    messages: tuple[tuple[int, str, str], ...]
    left_out: int
    whole: bool

    def texts(self) -> list[str]:
        """Every text shown, in order (for the slots' nonce)."""
        return [text for _, _, text in self.messages]

    def block(self, nonce: str) -> str:
        """The history as the prompt shows it: a heading, then one slot per message."""
        note = ""
        if self.left_out:
            note = (f" ({self.left_out} earlier turn{'s' if self.left_out > 1 else ''} left "
                    "out for length)")
        heading = (_WHOLE if self.whole else _BEFORE).format(note=note)
        slots = [slot(role, nonce, text, f' turn="{turn}"') for turn, role, text in self.messages]
        return "\n".join([heading, *slots])


def history_of(record: Record, budget: int | None = None) -> History | None:
    """The history to show with ``record`` (None: it has none)."""
    conversation = record.conversation
    if conversation is None:
        return None
    whole = record.turn == 0
    turns = conversation.turns if whole else conversation.turns[: record.turn - 1]
    per_turn = [_messages(position, turn) for position, turn in enumerate(turns, 1)]
    left_out = 0
    if budget is not None:
        total = sum(len(text) for messages in per_turn for _, _, text in messages)
        while per_turn and total > budget and (len(per_turn) > 1 or not whole):
            total -= sum(len(text) for _, _, text in per_turn.pop(0))
            left_out += 1
    messages = tuple(message for turn in per_turn for message in turn)
    if not messages and not left_out:
        return None
    return History(messages, left_out, whole)


def _messages(position: int, turn: Record) -> list[tuple[int, str, str]]:
    out = [(position, "user", turn.query or "")]
    for call in turn.tool_calls or ():
        text = call.text()
        if call.has_result:
            text += f" returned {json.dumps(call.result, ensure_ascii=False, sort_keys=True)}"
        out.append((position, "tool_call", text))
    if turn.answer is not None:
        out.append((position, "assistant", turn.answer))
    return out

