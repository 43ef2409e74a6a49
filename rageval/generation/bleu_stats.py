"""BLEU's per-segment statistics, exactly as sacrebleu extracts them, in a fraction of its time.

sacrebleu's ``_extract_corpus_statistics`` spends most of its time in two places: the 13a
tokeniser, whose first regular expression pads every space and punctuation mark through a
replacement template (one Python call per match), and ``extract_all_word_ngrams``, which builds
every n-gram with a Python loop. Here the first step is one ``str.translate`` (the expression
matches single characters, each replaced by itself between spaces), the three others run only
when their characters occur, and n-grams are counted per order by ``Counter(zip(...))`` in C.

Only sacrebleu's own 13a tokeniser with the four expressions this module knows takes the fast
path; any other tokeniser, or a sacrebleu whose 13a differs, is run through sacrebleu itself.
The parity tests compare every statistic with sacrebleu's on generated and adversarial text.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sacrebleu.metrics.bleu import BLEU as SacreBLEU

MAX_ORDER = 4

# The expressions of sacrebleu's TokenizerRegexp (mteval-v13a), as this module reproduces them.
_KNOWN_13A = (
    (r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 "),
    (r"([^0-9])([\.,])", r"\1 \2 "),
    (r"([\.,])([^0-9])", r" \1 \2"),
    (r"([0-9])(-)", r"\1 \2 "),
)
_ENTITIES = (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"))


@cache
def _fast_13a() -> Callable[[str], str] | None:
    """A 13a tokeniser equal to sacrebleu's installed one, or None when it is not the one
    this module knows."""
    from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

    rules = TokenizerRegexp()._re
    if tuple((pattern.pattern, repl) for pattern, repl in rules) != _KNOWN_13A:
        return None
    punctuation, period_before, period_after, dash = (pattern for pattern, _ in rules)
    # The first rule matches one ASCII character at a time: pad each one it matches.
    pad = str.maketrans({chr(c): f" {chr(c)} " for c in range(128)
                         if punctuation.fullmatch(chr(c))})

    def tokenize(line: str) -> str:
        line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
        if "&" in line:
            for entity, char in _ENTITIES:
                line = line.replace(entity, char)
        line = f" {line} ".translate(pad)
        if "." in line or "," in line:  # the two period/comma rules match nothing otherwise
            line = period_before.sub(r"\1 \2 ", line)
            line = period_after.sub(r" \1 \2", line)
        if "-" in line:
            line = dash.sub(r"\1 \2 ", line)
        return " ".join(line.split())

    return tokenize


def _preprocessor(bleu: SacreBLEU) -> Callable[[str], str]:
    """sacrebleu's ``_preprocess_segment`` for this BLEU, on the fast path where it can be."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    fast = _fast_13a() if type(bleu.tokenizer) is Tokenizer13a else None
    if fast is None:
        return bleu._preprocess_segment
    if bleu.lowercase:
        return lambda text: fast(text.lower().rstrip())
    return lambda text: fast(text.rstrip())


def _ngrams(tokens: list[str]) -> list[Counter]:
    """Counts of the n-grams of each order 1..4 (unigrams keyed by the token itself)."""
    counts = [Counter(tokens)]
    for n in range(2, MAX_ORDER + 1):
        counts.append(Counter(zip(*(tokens[i:] for i in range(n)), strict=False)))
    return counts


def _reference_info(lines: list[str]) -> tuple[list[Counter], list[int]]:
    """Each order's n-gram counts, maximised over the references, and their lengths."""
    merged: list[Counter] | None = None
    lengths = []
    for line in lines:
        tokens = line.split()
        lengths.append(len(tokens))
        counts = _ngrams(tokens)
        if merged is None:
            merged = counts
            continue
        for mine, theirs in zip(merged, counts, strict=True):
            for gram, count in theirs.items():
                if count > mine[gram]:
                    mine[gram] = count
    return merged or [Counter() for _ in range(MAX_ORDER)], lengths


def _segment(bleu: SacreBLEU, hypothesis: str, references: tuple[list[Counter], list[int]]
             ) -> list[int]:
    """[sys_len, ref_len, correct_1..4, total_1..4] of one tokenised hypothesis."""
    tokens = hypothesis.split()
    ref_counts, ref_lens = references
    correct, total = [], []
    for n, (counts, reference) in enumerate(zip(_ngrams(tokens), ref_counts, strict=True), 1):
        # Only shared n-grams count; the key intersection runs in C and most are not shared.
        correct.append(sum(min(counts[gram], reference[gram])
                           for gram in counts.keys() & reference.keys()))
        total.append(max(0, len(tokens) - n + 1))
    ref_len = bleu._get_closest_ref_len(len(tokens), ref_lens)
    return [len(tokens), ref_len, *correct, *total]


def corpus_statistics(bleu: SacreBLEU, hypotheses: Sequence[str],
                      streams: Sequence[Sequence[str | None]]) -> list[list[int]]:
    """What ``bleu._extract_corpus_statistics(hypotheses, streams)`` returns, value for value
    (None pads the reference streams of segments with fewer references)."""
    if bleu.max_ngram_order != MAX_ORDER:
        return [list(row) for row in bleu._extract_corpus_statistics(hypotheses, streams)]
    preprocess = _preprocessor(bleu)
    stats = []
    for hypothesis, refs in zip(hypotheses, zip(*streams, strict=True), strict=True):
        lines = [preprocess(ref) for ref in refs if ref is not None]
        stats.append(_segment(bleu, preprocess(hypothesis), _reference_info(lines)))
    _warn_if_tokenised(bleu, hypotheses)
    return stats


def _warn_if_tokenised(bleu: SacreBLEU, hypotheses: Sequence[str]) -> None:
    """sacrebleu's warning about hypotheses that look tokenised already."""
    if bleu._force or sum(1 for h in hypotheses if h.endswith(" .")) < 100:
        return
    log = logging.getLogger("sacrebleu")
    log.warning("That's 100 lines that end in a tokenized period ('.')")
    log.warning("It looks like you forgot to detokenize your test data, which may hurt your "
                "score.")
    log.warning("If you insist your data is detokenized, or don't care, you can suppress this "
                "message with the `force` parameter.")

