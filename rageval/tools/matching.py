"""Which of an agent's tool calls match the calls expected of it.

Two calls *match* when their names are equal and, by the ``match`` rule, their arguments:

``name``
    the arguments are not compared;
``exact``
    the arguments are equal JSON objects;
``args_subset``
    every expected argument is present in the call with an equal value (the call may add
    arguments of its own).

JSON values are equal when they are of one JSON type and equal: objects key by key whatever
their order, arrays item by item in order, strings and ``true``/``false``/``null`` as they are.
Numbers are equal when they differ by at most ``tol`` (0: equal values, ``1`` equal to
``1.0``); a boolean is never a number (``true`` is not ``1``).

Each call matches at most one expected call. With ``order="any"`` the most calls that can be
paired are paired (a maximum bipartite matching, so no greedy choice loses a pair); with
``order="strict"`` the pairs must also keep their order on both sides (the longest common
subsequence of the two lists under the match rule).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rageval.core.records import ToolCall

__all__ = ["MATCH_RULES", "ORDER_RULES", "Pairing", "json_equal", "pair_calls"]

MATCH_RULES: tuple[str, ...] = ("exact", "name", "args_subset")
ORDER_RULES: tuple[str, ...] = ("strict", "any")

Pairing = list[tuple[int, int]]  # (call index, expected call index), in call order


def json_equal(a: Any, b: Any, tol: float = 0.0) -> bool:
    """Whether two JSON values are equal (see the module), numbers within ``tol``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, numbers.Real) or isinstance(b, numbers.Real):
        if not (isinstance(a, numbers.Real) and isinstance(b, numbers.Real)):
            return False
        return a == b if tol == 0 else abs(a - b) <= tol
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k], tol) for k in a)
    if isinstance(a, Sequence) and isinstance(b, Sequence):
        return len(a) == len(b) and all(json_equal(x, y, tol) for x, y in zip(a, b, strict=True))
    return False


def _matcher(match: str, tol: float) -> Callable[[ToolCall, ToolCall], bool]:
    if match == "name":
        return lambda call, want: call.name == want.name
    if match == "exact":
        return lambda call, want: (call.name == want.name
                                   and json_equal(call.arguments, want.arguments, tol))
    if match == "args_subset":
        return lambda call, want: call.name == want.name and all(
            key in call.arguments and json_equal(call.arguments[key], value, tol)
            for key, value in want.arguments.items())
    raise ValueError(f"unknown match rule {match!r}; expected one of {list(MATCH_RULES)}")


def pair_calls(calls: Sequence[ToolCall], expected: Sequence[ToolCall], *, match: str,
               order: str, tol: float = 0.0) -> Pairing:
    """The calls paired with expected calls (see the module): as many pairs as can be."""
    same = _matcher(match, tol)
    fits = [[same(call, want) for want in expected] for call in calls]
    if order == "strict":
        return _common_subsequence(fits, len(expected))
    if order == "any":
        return _bipartite(fits, len(expected))
    raise ValueError(f"unknown order rule {order!r}; expected one of {list(ORDER_RULES)}")


def _common_subsequence(fits: list[list[bool]], width: int) -> Pairing:
    """The longest order-keeping pairing (dynamic programming over both lists)."""
    rows = len(fits)
    best = [[0] * (width + 1) for _ in range(rows + 1)]
    for i in range(rows - 1, -1, -1):
        for j in range(width - 1, -1, -1):
            best[i][j] = (best[i + 1][j + 1] + 1 if fits[i][j]
                          else max(best[i + 1][j], best[i][j + 1]))
    pairs: Pairing = []
    i = j = 0
    while i < rows and j < width:
        if fits[i][j] and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _bipartite(fits: list[list[bool]], width: int) -> Pairing:
    """A maximum pairing whatever the order: for each call in turn, a breadth-first search
    for an augmenting path (Kuhn's algorithm, without recursion: a long agent trace needs no
    deep stack)."""
    owner: list[int | None] = [None] * width  # expected call -> the call paired with it
    paired: list[int | None] = [None] * len(fits)  # call -> the expected call it has
    options = [[want for want in range(width) if row[want]] for row in fits]
    for start in range(len(fits)):
        reached_from: dict[int, int] = {}  # expected call -> the call that reached it
        queue, free = [start], None
        while queue and free is None:
            call = queue.pop(0)
            for want in options[call]:
                if want in reached_from:
                    continue
                reached_from[want] = call
                holder = owner[want]
                if holder is None:
                    free = want
                    break
                queue.append(holder)
        while free is not None:  # shift the pairs along the path, back to the start
            call = reached_from[free]
            before = paired[call]
            owner[free], paired[call] = call, free
            free = before if call != start else None
    return [(call, want) for call, want in enumerate(paired) if want is not None]
