"""The prompt rendering's faster paths give what the plain ones gave: a slot nonce hashed from
its pieces joined (not fed one by one), a template's fields filled from its cut pieces (not by
a regex substitution per request)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.judge.prompting.layout import fixed_first, split_template
from rageval.judge.prompting.slots import PLACEHOLDER, slot_nonce

_NAMES = st.sampled_from(["query", "answer", "contexts", "reference", "conversation"])


def _nonce_fed_piece_by_piece(prompt_hash: str, texts: dict[str, list[str]]) -> str:
    digest = hashlib.sha256(prompt_hash.encode())
    for name, values in texts.items():
        for value in values:
            for part in (name.encode(), value.encode("utf-8", "surrogatepass")):
                digest.update(len(part).to_bytes(8, "big"))
                digest.update(part)
    return digest.hexdigest()[:12]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=8), st.dictionaries(_NAMES, st.lists(st.text(), max_size=3)))
def test_the_nonce_is_the_hash_of_the_pieces_in_order(prompt_hash: str,
                                                      texts: dict[str, list[str]]) -> None:
    assert slot_nonce(prompt_hash, texts) == _nonce_fed_piece_by_piece(prompt_hash, texts)


_PIECE = st.one_of(st.sampled_from(["{query}", "{answer}", "{contexts}", "\n\n", "\n", "{",
                                    "}", "{1x}", "Grade it.", "Query:"]), st.text(max_size=6))


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECE, max_size=12).map("".join), st.text(max_size=5), st.text(max_size=5),
       st.text(max_size=20))
def test_the_fields_are_filled_as_a_substitution_fills_them(template: str, reply: str,
                                                            before: str, text: str) -> None:
    blocks = {"query": f"<q>{text}</q>", "answer": "{query}", "contexts": text}

    def substituted() -> str:
        head, rest = split_template(template)
        fields = PLACEHOLDER.sub(lambda match: blocks[match.group(1)], rest)
        return "\n\n".join(part for part in (head, reply, before, fields) if part)

    # A placeholder without a block (drawn by chance: "{A}") is a KeyError either way.
    assert _outcome(lambda: fixed_first(template, blocks, reply, before)) == \
        _outcome(substituted)


def _outcome(make: Callable[[], str]) -> tuple[str, str]:
    try:
        return "text", make()
    except KeyError as error:
        return "missing", str(error)
