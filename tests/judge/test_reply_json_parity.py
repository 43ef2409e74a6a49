"""A reply's JSON read by the decoder's scanner alone, where it reads the whole reply, is
what the decoder reads (value or error)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.judge.prompting import reply_json

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)


def _outcome(read: Any, text: str) -> str:
    try:
        return repr(("value", read(text)))
    except ValueError as error:
        return repr(("error", type(error)))


@settings(max_examples=500, deadline=None)
@given(_VALUES, st.sampled_from(["", " ", "\n", "x", "}", ' {"a": 1}', "\t"]),
       st.sampled_from(["", " ", "\n", "x"]), st.booleans())
def test_a_reply_reads_as_the_decoder_reads_it(value: Any, after: str, before: str,
                                               raw_newline: bool) -> None:
    text = before + json.dumps(value) + after
    if raw_newline:  # what the tolerant decoder reads inside strings
        text = text.replace("\\n", "\n")
    assert _outcome(reply_json._whole, text) == _outcome(reply_json._DECODER.decode, text)
