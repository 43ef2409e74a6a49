"""ragas' multi-turn samples (``MultiTurnSample``) read as conversations.

A ragas row whose ``user_input`` is a list of messages, as ``EvaluationDataset.to_jsonl``
writes them::

    {"user_input": [{"content": "What is the weather?", "type": "human"},
                    {"content": "", "type": "ai",
                     "tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]},
                    {"content": "rain, 12 C", "type": "tool"},
                    {"content": "It rains in Oslo.", "type": "ai"}],
     "reference": "...", "reference_tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]}

is a conversation: each human message starts a turn (its ``query``); the AI messages of the
turn give its tool calls (``args`` read as ``arguments``) and its answer (the last AI text);
each tool message gives the result of the turn's first call still without one. The row's
``reference`` and ``reference_tool_calls`` are the conversation's: the calls ragas expects over
the whole sample, scored by ``tools:*(scope=conversation)`` as ragas' ``ToolCallAccuracy`` and
``ToolCallF1`` score them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rageval.core.errors import InputError

__all__ = ["is_multi_turn", "multi_turn"]

_TYPES = ("human", "ai", "tool")


def is_multi_turn(row: Mapping[str, Any]) -> bool:
    """Whether a ragas row (its ``user_input`` read as ``query``) is a multi-turn sample."""
    return isinstance(row.get("query"), list | tuple)


def multi_turn(row: dict[str, Any], source: str, line: int, column: str) -> dict[str, Any]:
    """The conversation a multi-turn row holds (``column``: where its messages were read)."""
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(row.pop("query")):
        where = f"{column}[{index}]"
        if not isinstance(message, Mapping):
            raise InputError("expected a message object with 'content' and 'type'", path=source,
                             line=line, field=where)
        kind = message.get("type")
        if kind not in _TYPES:
            raise InputError(f"expected 'type' to be one of {', '.join(_TYPES)}, found "
                             f"{kind!r}", path=source, line=line, field=f"{where}.type")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise InputError("expected a string", path=source, line=line,
                             field=f"{where}.content")
        if kind == "human":
            turns.append({"query": content or ""})
            continue
        if not turns:
            raise InputError(f"an {kind} message before the first human message", path=source,
                             line=line, field=where)
        _add(turns[-1], kind, content, message, source, line, where)
    if not turns:
        raise InputError("a multi-turn sample without messages", path=source, line=line,
                         field=column)
    out = {key: value for key, value in row.items() if key not in ("answer", "contexts")}
    for key in ("answer", "contexts"):
        if row.get(key) is not None:
            raise InputError(f"a multi-turn sample gives its {key} in its messages",
                             path=source, line=line, field=key)
    out["turns"] = turns
    if isinstance(out.get("reference_tool_calls"), list):
        out["reference_tool_calls"] = [_call(c) for c in out["reference_tool_calls"]]
    return out


def _add(turn: dict[str, Any], kind: str, content: str | None, message: Mapping[str, Any],
         source: str, line: int, where: str) -> None:
    if kind == "ai":
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise InputError("expected a list of tool calls", path=source, line=line,
                             field=f"{where}.tool_calls")
        turn.setdefault("tool_calls", []).extend(_call(call) for call in calls)
        if content:
            turn["answer"] = content
        return
    waiting = next((call for call in turn.get("tool_calls", ()) if "result" not in call), None)
    if waiting is None:
        raise InputError("a tool message with no tool call waiting for its result",
                         path=source, line=line, field=where)
    waiting["result"] = content


def _call(call: Any) -> Any:
    """A ragas tool call (``name``, ``args``) in rageval's form; anything else as it is, for
    the record's own checks to name."""
    if isinstance(call, Mapping) and "args" in call and "arguments" not in call:
        return {**{k: v for k, v in call.items() if k != "args"}, "arguments": call["args"]}
    return dict(call) if isinstance(call, Mapping) else call
