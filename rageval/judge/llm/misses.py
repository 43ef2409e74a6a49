"""Why an offline replay misses: cached replies to the same prompts under other settings.

A reply is cached under the SHA-256 of everything that can change it (model, messages, every
sampling parameter, response format, sample index), so a replay with one setting changed finds
nothing, however full the cache. When a replay misses, :func:`explain_misses` looks through the
newest :data:`SCANNED` cached requests for the same messages, finds for each missing request the
cached one that differs in the fewest settings, and names those settings, the value cached,
the value of this run and the flag that would match.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from rageval.judge.llm.cache.entries import canonical_json, encode_format
from rageval.judge.llm.cache.store import JudgeCache
from rageval.judge.llm.transport.formats import LADDERS

if TYPE_CHECKING:
    from rageval.judge.llm.options import JudgeOptions
    from rageval.judge.llm.units import Unit

__all__ = ["SCANNED", "explain_misses"]

#: The newest cache entries searched for the same prompts (a bound on the time a miss takes to
#: explain: about a second per 100,000 entries).
SCANNED = 200_000

_SHOWN = 3  # kinds of difference named

# A setting that differs: (name, cached value, this run's value), values as canonical JSON.
Difference = tuple[str, str, str]

_FLAGS = {"model": "--judge-model", "max_tokens": "--judge-max-tokens",
          "temperature": "--judge-temperature", "seed": "--judge-seed"}
# The --judge-response-format mode whose ladder holds each wire format.
_MODE_OF_WIRE = {"json_schema": "json_schema", "json_object+schema": "json_object",
                 "json_object": "json_object", "text": "text"}


def explain_misses(judge: JudgeOptions, lacking: list[Unit]) -> str | None:
    """What the cache holds for the prompts of ``lacking`` under other settings, in words
    (None when it holds none of them, or the cache is not a local file)."""
    cache = judge.open_cache()
    if not isinstance(cache, JudgeCache):
        return None
    with cache:
        found = nearest(judge, lacking, _requests(cache.newest_requests(SCANNED)))
    if not found:
        return None
    kinds = Counter(found.values())
    parts = [_describe(diffs, n) for diffs, n in kinds.most_common(_SHOWN)]
    others = len(kinds) - _SHOWN
    more = f"; and {others} other kinds of difference" if others > 0 else ""
    unmatched = len(lacking) - len(found)
    none = (f"; {unmatched} have no cached reply to the same prompt (a rubric or a record "
            "changed, or they were never asked)") if unmatched else ""
    return ("the cache holds replies to the same prompts under other settings: "
            + "; ".join(parts) + more + none)


def nearest(judge: JudgeOptions, lacking: list[Unit],
            cached: Iterable[dict[str, Any]]) -> dict[int, tuple[Difference, ...]]:
    """For each unit of ``lacking`` (by position) with a cached request of the same messages,
    the settings in which the nearest such request differs (fewest differences, then the
    first seen)."""
    by_prompt: dict[str, list[int]] = {}
    for i, unit in enumerate(lacking):
        by_prompt.setdefault(canonical_json(unit.messages), []).append(i)
    best: dict[int, tuple[Difference, ...]] = {}
    rank: dict[int, tuple[int, int]] = {}
    for request in cached:
        for i in by_prompt.get(_messages_text(request), ()):
            diffs = differences(judge, lacking[i], request)
            # Among equally near ones, the highest sample: the number of samples cached.
            sample = request.get("sample_index")
            order = (len(diffs), -sample if isinstance(sample, int) else 0)
            if diffs and (i not in rank or order < rank[i]):
                best[i], rank[i] = diffs, order
    return best


def differences(judge: JudgeOptions, unit: Unit,
                request: dict[str, Any]) -> tuple[Difference, ...]:
    """The settings in which a cached ``request`` (a request summary) differs from ``unit``
    as this run would send it."""
    cached = _settings(request)
    wanted = _settings({"model": judge.model, "params": judge.params(unit.sample),
                        "sample_index": unit.sample})
    out = [(name, cached.get(name, "null"), wanted.get(name, "null"))
           for name in sorted(cached.keys() | wanted.keys())
           if cached.get(name, "null") != wanted.get(name, "null")]
    fmt = _wire_name(request.get("response_format"))
    ladder = LADDERS.get(judge.response_format, ())
    if fmt not in ladder:
        out.append(("response_format", json.dumps(fmt), json.dumps(judge.response_format)))
    elif unit.schema is not None and encode_format(request.get("response_format")) != \
            encode_format(unit.schema.wire(fmt)):
        out.append(("reply schema", '"cached"', '"this version\'s"'))
    return tuple(out)


def _settings(request: dict[str, Any]) -> dict[str, str]:
    """A request's settings by name, values as canonical JSON: the model, the sample index,
    every sampling parameter, the seed as the run's base seed (sample i is sent seed + i)."""
    params = dict(request.get("params") or {})
    sample = request.get("sample_index") or 0
    seed = params.pop("seed", None)
    if isinstance(seed, int) and isinstance(sample, int):
        params["seed"] = seed - sample
    params.pop("top_logprobs", None)  # sent with logprobs, always the same number
    out = {name: canonical_json(value) for name, value in params.items() if value is not None}
    out["model"] = canonical_json(request.get("model"))
    out["sample_index"] = canonical_json(sample)
    return out


def _describe(diffs: tuple[Difference, ...], count: int) -> str:
    """``count`` replies that differ in ``diffs``, and the flags that would match them."""
    said = " and ".join(_difference(*d) for d in diffs)
    flags = [flag for flag in (_flag(*d) for d in diffs) if flag]
    hint = f" (give {' '.join(flags)})" if flags else ""
    return f"{count} with {said}{hint}"


def _difference(name: str, cached: str, wanted: str) -> str:
    if name == "sample_index":
        return f"samples up to {cached} cached where this run asks for sample {wanted}"
    return f"{name} {_shown(cached)} where this run has {_shown(wanted)}"


def _flag(name: str, cached: str, wanted: str) -> str | None:
    """The option that makes this run send the cached value (None: no option does)."""
    value = json.loads(cached)
    if name == "sample_index":
        return f"--judge-samples {value + 1}"
    if name == "response_format":
        return f"--judge-response-format {_MODE_OF_WIRE[value]}"
    if name == "logprobs":
        return "--judge-logprobs" if value else "--no-judge-logprobs"
    if name in _FLAGS:
        return f"without {_FLAGS[name]}" if value is None else f"{_FLAGS[name]} {value}"
    if name == "reply schema":
        return None
    if value is None:
        return f"without --judge-extra {name}"
    return f"--judge-extra {name}={cached}"


def _shown(value: str) -> str:
    return "none" if value == "null" else value


def _wire_name(wire: object) -> str:
    """The wire format a cached ``response_format`` was sent in."""
    if not isinstance(wire, dict):
        return "text"
    if wire.get("type") == "json_schema":
        return "json_schema"
    return "json_object+schema" if "schema" in wire else "json_object"


def _messages_text(request: dict[str, Any]) -> str:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return ""
    try:
        return canonical_json(messages)
    except (TypeError, ValueError):
        return ""


def _requests(texts: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The request summaries among ``texts`` (an unreadable one is skipped: it explains
    nothing)."""
    for text in texts:
        try:
            request = json.loads(text)
        except ValueError:
            continue
        if isinstance(request, dict):
            yield request
