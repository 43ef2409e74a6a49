"""A reply's provenance, and the details a signature reads, as the plain ways made them: one
reply's provenance without the loops over several, and details shared by content without
encoding each as JSON."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.judge.llm.replies import provenance, provenance_only
from rageval.judge.llm.transport.params import DEFAULT, DEFAULTED
from rageval.judge.llm.units import Reply

_REPLIES = st.builds(Reply, endpoint=st.sampled_from([None, "", "http://a/v1", "http://b/v1"]),
                     format=st.sampled_from([None, "", "json_schema", "text"]),
                     defaults=st.lists(st.sampled_from([*DEFAULTED, "other"]), max_size=3)
                     .map(tuple))


def _plain_provenance(replies: list[Reply]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in (("endpoint", [r.endpoint for r in replies]),
                         ("response_format", [r.format for r in replies])):
        seen = sorted({v for v in values if v})
        if seen:
            out[name] = seen[0] if len(seen) == 1 else seen
    for name in DEFAULTED:
        default = {name in r.defaults for r in replies}
        if True in default:
            out[name] = DEFAULT if default == {True} else ["configured", DEFAULT]
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(_REPLIES, min_size=1, max_size=3))
def test_provenance_is_the_plain_provenance(replies: list[Reply]) -> None:
    got = provenance(replies)
    assert got == _plain_provenance(replies)
    assert list(got) == list(_plain_provenance(replies))


_VALUE = st.one_of(st.sampled_from(["a", "b", "default"]), st.lists(st.sampled_from(["a", "b"]),
                                                                    max_size=2),
                   st.sampled_from([1, 1.0, True, None, ("a",), {"x": 1}]))
_DETAILS = st.lists(st.one_of(st.none(), st.dictionaries(
    st.sampled_from(["endpoint", "response_format", "flags", "other"]), _VALUE, max_size=4)),
    max_size=8)


@settings(max_examples=300, deadline=None)
@given(_DETAILS)
def test_details_are_shared_by_content_as_their_json_shares_them(
        details: list[dict[str, Any] | None]) -> None:
    keys = ("endpoint", "response_format", "flags")
    got = provenance_only(details, keys)
    assert got is not None
    plain: list[Any] = []
    shared: dict[str, dict[str, Any]] = {}
    for detail in details:
        kept = {k: detail[k] for k in keys if k in detail} if detail else {}
        plain.append(shared.setdefault(json.dumps(kept, sort_keys=True, default=str), kept)
                     if kept else None)
    assert json.dumps(got, default=str) == json.dumps(plain, default=str)
    # Contents that are the same are one dict; different ones never are.
    for a, b in itertools.pairwise(got):
        same = json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True,
                                                                         default=str)
        assert (a is b) <= same
