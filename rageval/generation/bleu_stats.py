"""BLEU's per-segment statistics, exactly as sacrebleu extracts them, in a fraction of its time.

sacrebleu's ``_extract_corpus_statistics`` spends most of its time in two places: the 13a
tokeniser, whose first regular expression pads every space and punctuation mark through a
replacement template (one Python call per match), and ``extract_all_word_ngrams``, which builds
every n-gram with a Python loop. Here the first rule is a split on the marks (spaces need no
padding: see :func:`_fast_13a`), the three others run only when their characters occur, and
each text's n-grams are counted by one ``Counter`` in C.

Only sacrebleu's own 13a tokeniser with the four expressions this module knows takes the fast
path; any other tokeniser, or a sacrebleu whose 13a differs, is run through sacrebleu itself.
The parity tests compare every statistic with sacrebleu's on generated and adversarial text.
"""

from __future__ import annotations

import itertools
import logging
import re
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
    # The first rule pads single ASCII characters with spaces; one of them is the space itself,
    # the most frequent match by far. Padding a space only adds spaces, which neither the later
    # rules (they look at a character's immediate neighbours, and a space stays a space) nor
    # the final split can tell apart: pad every other character of the class, and not spaces.
    # Splitting on a capturing class and joining with spaces pads each mark (C only).
    marks = "".join(chr(c) for c in range(128) if c != 32 and punctuation.fullmatch(chr(c)))
    split_marks = re.compile(f"([{re.escape(marks)}])").split

    def tokenize(line: str) -> str:
        line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
        if "&" in line:
            for entity, char in _ENTITIES:
                line = line.replace(entity, char)
        line = " ".join(split_marks(f" {line} "))
        if "." in line or "," in line:  # the two period/comma rules match nothing otherwise
            line = period_before.sub(_space_after_both, line)
            line = period_after.sub(_space_before_both, line)
        if "-" in line:
            line = dash.sub(_space_after_both, line)
        return " ".join(line.split())

    return tokenize


# The replacements of the last three rules, as functions: cheaper per match than templates.
def _space_after_both(match: re.Match[str]) -> str:  # r"\1 \2 "
    return f"{match[1]} {match[2]} "


def _space_before_both(match: re.Match[str]) -> str:  # r" \1 \2"
    return f" {match[1]} {match[2]}"


def _preprocessor(bleu: SacreBLEU) -> Callable[[str], str]:
    """sacrebleu's ``_preprocess_segment`` for this BLEU, on the fast path where it can be."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    fast = _fast_13a() if type(bleu.tokenizer) is Tokenizer13a else None
    if fast is None:
        return bleu._preprocess_segment
    if bleu.lowercase:
        return lambda text: fast(text.lower().rstrip())
    return lambda text: fast(text.rstrip())


def _ngrams(tokens: list[str]) -> Counter:
    """Counts of every n-gram of orders 1..4, as tuples (the order is the tuple's length):
    one Counter per text, built in C."""
    return Counter(itertools.chain.from_iterable(
        zip(*(tokens[i:] for i in range(n)), strict=False) for n in range(1, MAX_ORDER + 1)))


def _reference_info(lines: list[str]) -> tuple[Counter, list[int]]:
    """The references' n-gram counts, each the most any one reference has, and their
    lengths."""
    merged: Counter | None = None
    lengths = []
    for line in lines:
        tokens = line.split()
        lengths.append(len(tokens))
        counts = _ngrams(tokens)
        if merged is None:
            merged = counts
            continue
        for gram, count in counts.items():
            if count > merged[gram]:
                merged[gram] = count
    return merged if merged is not None else Counter(), lengths


def _segment(bleu: SacreBLEU, hypothesis: str, references: tuple[Counter, list[int]]
             ) -> list[int]:
    """[sys_len, ref_len, correct_1..4, total_1..4] of one tokenised hypothesis."""
    tokens = hypothesis.split()
    ref_counts, ref_lens = references
    counts = _ngrams(tokens)
    correct = [0] * MAX_ORDER
    # Only shared n-grams count; the key intersection runs in C and most are not shared.
    for gram in counts.keys() & ref_counts.keys():
        mine, theirs = counts[gram], ref_counts[gram]
        correct[len(gram) - 1] += mine if mine < theirs else theirs
    total = [max(0, len(tokens) - n) for n in range(MAX_ORDER)]
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

