"""BLEU's fast per-segment statistics against sacrebleu's own, value for value."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from rageval.generation.bleu_stats import _fast_13a, corpus_statistics

# Characters every rule of the 13a tokeniser reacts to, beside letters and spaces.
_ALPHABET = st.sampled_from([
    *"ab xyZ09.,-;:!?'\"()[]{}<>/\\@#$%^&*_+=|~`\n\t\r" "éß中",
    "&quot;", "&amp;", "&lt;", "&gt;", "<skipped>", "-\n", "3.5", "1,000", "9-", " .", "..."])
_TEXT = st.lists(_ALPHABET, max_size=40).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_TEXT)
def test_fast_13a_tokenises_as_sacrebleu(text: str) -> None:
    fast = _fast_13a()
    assert fast is not None
    assert fast(text) == Tokenizer13a()(text)


def _sacrebleu_stats(bleu: BLEU, hypotheses: list[str], streams: list[list[str | None]]
                     ) -> list[list[int]]:
    return [list(row) for row in bleu._extract_corpus_statistics(hypotheses, streams)]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_statistics_equal_sacrebleus(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, 6))
    width = data.draw(st.integers(1, 3))
    hypotheses = [data.draw(_TEXT) for _ in range(size)]
    streams: list[list[str | None]] = [[data.draw(_TEXT) for _ in range(size)]]
    for _ in range(width - 1):  # later streams may lack a segment's reference
        streams.append([data.draw(st.none() | _TEXT) for _ in range(size)])
    lowercase = data.draw(st.booleans())
    expected = _sacrebleu_stats(BLEU(lowercase=lowercase, effective_order=True),
                                hypotheses, streams)
    got = corpus_statistics(BLEU(lowercase=lowercase, effective_order=True), hypotheses, streams)
    assert got == expected


@pytest.mark.parametrize("tokenize", ["none", "char", "intl", "zh"])
def test_other_tokenisers_go_through_sacrebleu(tokenize: str) -> None:
    hypotheses = ["The cat sat on the mat.", "Zwei Hunde, 3.5 Katzen!", ""]
    streams: list[list[str | None]] = [["The cat is on the mat.", "Zwei Katzen", "nothing"],
                                       ["A cat sat there.", None, None]]
    expected = _sacrebleu_stats(BLEU(tokenize=tokenize), hypotheses, streams)
    assert corpus_statistics(BLEU(tokenize=tokenize), hypotheses, streams) == expected


def test_repeated_ngrams_are_clipped_by_the_best_reference() -> None:
    hypotheses = ["the the the the the the cat cat"]
    streams: list[list[str | None]] = [["the cat the cat"], ["the the the mat"]]
    expected = _sacrebleu_stats(BLEU(), hypotheses, streams)
    got = corpus_statistics(BLEU(), hypotheses, streams)
    assert got == expected
    assert got[0][2] == 5  # "the" clipped at 3 (second reference) + "cat" at 2 (first)


def test_tokenised_input_warning_is_kept(caplog: pytest.LogCaptureFixture) -> None:
    hypotheses = [f"sentence number {i} ." for i in range(100)]
    streams: list[list[str | None]] = [[f"sentence {i} ." for i in range(100)]]
    with caplog.at_level(logging.WARNING, logger="sacrebleu"):
        corpus_statistics(BLEU(), hypotheses, streams)
    assert "100 lines that end in a tokenized period" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sacrebleu"):
        corpus_statistics(BLEU(force=True), hypotheses, streams)
    assert caplog.text == ""
