"""A request's cache keys made from parts encoded once per run (its messages alone encoded per
request) are the SHA-256 of its whole canonical document, as a key has always been."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.judge.llm.cache.entries import (
    CACHE_KEY_VERSION,
    canonical_json,
    encode_format,
    key_parts,
    keys_and_request_id,
    keys_of,
)
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.units import make_unit

_TEXT = st.text()
_MESSAGE = st.one_of(st.fixed_dictionaries({"role": _TEXT, "content": _TEXT}),
                     st.dictionaries(st.text(max_size=5), _TEXT, max_size=3))
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([0.0, 0.7]),
                    st.text(max_size=5))
_PARAMS = st.dictionaries(st.sampled_from(["temperature", "seed", "top_p", "stop"]),
                          st.one_of(_SCALAR, st.lists(_SCALAR, max_size=2)), max_size=3)
_FORMATS = {"json_schema": {"type": "json_schema", "json_schema": {"name": "é", "strict": True}},
            "json_object": {"type": "json_object"}, "text": None}


def _reference_key(model: str, messages: list[dict[str, str]], params: dict[str, Any],
                   response_format: dict[str, Any] | None, sample: int) -> str:
    """A key as the cache defines it: the hash of the request's whole canonical document."""
    document = {"messages": [dict(m) for m in messages], "model": model,
                "params": {k: v for k, v in params.items() if v is not None},
                "response_format": response_format, "sample_index": sample,
                "v": CACHE_KEY_VERSION}
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


@settings(max_examples=300, deadline=None)
@given(st.lists(_MESSAGE, max_size=3), _PARAMS, st.sampled_from([0, 1, 3]),
       st.sampled_from(["gpt-4o-mini", "modèle"]))
def test_keys_from_parts_are_the_hash_of_the_whole_document(
        messages: list[dict[str, str]], params: dict[str, Any], sample: int, model: str) -> None:
    encoded = {name: encode_format(fmt) for name, fmt in _FORMATS.items()}
    keys = keys_of(messages, key_parts(model, params, encoded, sample))
    assert keys == {name: _reference_key(model, messages, params, fmt, sample)
                    for name, fmt in _FORMATS.items()}
    with_id, request_id = keys_and_request_id(model, messages, params, encoded, sample)
    assert with_id == keys
    assert request_id == _reference_key(model, messages, params, None, sample)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 0.0, 1, 1.0, True, 0.7]),
                          st.sampled_from([None, 7, 7.0]), st.integers(0, 2)),
                min_size=1, max_size=6),
       _TEXT)
def test_a_schema_keys_each_request_as_its_own_parameters_say(
        runs: list[tuple[Any, Any, int]], content: str) -> None:
    """The parts a schema keeps for the next request are used only for the same model, ladder
    and parameters, type for type (0 and 0.0 are different keys)."""
    schema = ReplySchema("s", {"type": "object"})
    messages = [{"role": "user", "content": content}]
    for temperature, seed, sample in runs:
        judge = JudgeOptions(model="m", temperature=temperature, seed=seed)
        unit = make_unit(judge, schema, 0, None, sample, messages)
        params = judge.params(sample)
        assert unit.keys == {fmt: _reference_key("m", messages, params, schema.wire(fmt), sample)
                             for fmt in judge.ladder}
        assert unit.request_id == _reference_key("m", messages, params, None, sample)


_CHUNK = st.one_of(st.text(max_size=40), st.sampled_from(['"', "\\", "\n", "\x00", "é", "\u2028",
                                                          "<ctx-12ab>", "x" * 70]))
_HEADS = st.lists(_CHUNK, max_size=8).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["sys A", "sys B" * 40, '"q\\\n']), _HEADS,
                          st.sampled_from(["", "r", "é\n", "\ud800", '"']),
                          st.sampled_from(["user", "assistant"])),
                min_size=1, max_size=8),
       _HEADS)
def test_requests_sharing_a_start_are_keyed_as_the_whole_document(
        requests: list[tuple[str, str, str, str]], common: str) -> None:
    """Requests whose system message and user message start alike (as a rubric's do), their
    ends differing, lone surrogates among them, get the keys of their whole documents, in
    whatever order they come."""
    from rageval.core.errors import UsageError
    from rageval.judge.llm.cache import prefixes

    prefixes._SHARED.clear()  # what this example's requests share is learnt from them
    encoded = {name: encode_format(fmt) for name, fmt in _FORMATS.items()}
    parts = key_parts("m", {"temperature": 0.0}, encoded, 0)
    for system, head, tail, role in requests:
        messages = [{"role": "system", "content": system},
                    {"role": role, "content": common + head + tail}]
        try:
            expected: Any = {name: _reference_key("m", messages, {"temperature": 0.0}, fmt, 0)
                             for name, fmt in _FORMATS.items()}
        except UnicodeEncodeError:
            expected = UsageError
        try:
            got: Any = keys_of(messages, parts)
        except UsageError:
            got = UsageError
        assert got == expected
