"""The tokens ROUGE compares: rouge-score's tokenizer (``default``: the runs of ASCII letters
and digits of the lowercased text), a Unicode-aware one (``unicode``: NFKC and lowercase, runs
of letters, marks and digits of every script, one token per Han or kana character), and
optional Porter stemming of tokens longer than 3 characters, as rouge-score's
``use_stemmer=True``. The ``tokenizer`` and ``stem`` parameters are described in
:mod:`~rageval.generation.rouge.metric`.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable

TOKENIZERS: tuple[str, ...] = ("default", "unicode")

# rouge-score lowercases, turns every run of characters outside [a-z0-9] into a space and splits
# on whitespace: the tokens are exactly the runs of [a-z0-9] in the lowercased text. Internally
# they are found as bytes (non-ASCII characters become "?", a separator), which is faster.
_SEPARATE_NON_ALNUM = bytes(
    c if (0x61 <= c <= 0x7A or 0x30 <= c <= 0x39) else 0x20 for c in range(256)
)
# rouge-score keeps a (possibly stemmed) token only when it matches this, as re.match does.
_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")
_STEM_MIN_LENGTH = 4  # rouge-score stems tokens longer than 3 characters
_STEM_CACHE_LIMIT = 1 << 18

# Scripts written without spaces between words: one token per character.
_PER_CHARACTER_BLOCKS: tuple[tuple[int, int], ...] = (
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK unified ideographs extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x2FA1F),  # CJK extensions B-F, compatibility supplement
    (0x30000, 0x323AF),  # CJK extensions G-H
)

Token = str | bytes  # the default tokenizer's tokens are ASCII bytes internally

_stem_cache: dict[Token, Token] = {}


@functools.cache
def _porter() -> Callable[[str], str]:
    """NLTK's Porter stemmer in its default mode, as rouge-score builds it (loaded lazily)."""
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer().stem


def _stem_uncached(token: Token) -> Token:
    if len(token) < _STEM_MIN_LENGTH or not token.isascii():
        return token  # rouge-score leaves short tokens alone; Porter is for English (ASCII)
    word = token.decode("ascii") if isinstance(token, bytes) else token
    stemmed = _porter()(word)
    # rouge-score drops a stemmed token that is no longer letters and digits.
    if not _VALID_TOKEN.match(stemmed):
        stemmed = ""
    return stemmed.encode("ascii") if isinstance(token, bytes) else stemmed


def _stemmed(tokens: list[Token]) -> list[Token]:
    """Tokens after stemming, through a process-wide cache (stemming is a pure function)."""
    cache = _stem_cache
    out = []
    for token in tokens:
        stemmed = cache.get(token)
        if stemmed is None:
            if len(cache) >= _STEM_CACHE_LIMIT:
                cache.clear()
            stemmed = cache[token] = _stem_uncached(token)
        if stemmed:
            out.append(stemmed)
    return out


def _ranges(codepoints: Iterable[int]) -> str:
    """A regex character-class body for a sorted iterable of code points."""
    parts = []
    for _, group in itertools.groupby(enumerate(codepoints), lambda item: item[1] - item[0]):
        run = [cp for _, cp in group]
        first, last = re.escape(chr(run[0])), re.escape(chr(run[-1]))
        parts.append(first if run[0] == run[-1] else f"{first}-{last}")
    return "".join(parts)


@functools.cache
def _unicode_token_pattern() -> re.Pattern[str]:
    """Single Han/kana characters, or runs of other letters, marks and digits (built once)."""
    category = unicodedata.category
    single, run = [], []
    for cp in range(sys.maxunicode + 1):
        if category(chr(cp))[0] in "LMN":
            per_char = any(lo <= cp <= hi for lo, hi in _PER_CHARACTER_BLOCKS)
            (single if per_char else run).append(cp)
    return re.compile(f"[{_ranges(single)}]|[{_ranges(run)}]+")


def _default_tokens(text: str) -> list[bytes]:
    return text.lower().encode("ascii", "replace").translate(_SEPARATE_NON_ALNUM).split()


def _unicode_tokens(text: str) -> list[str]:
    return _unicode_token_pattern().findall(unicodedata.normalize("NFKC", text).lower())


def _tokens(text: str, tokenizer: str, stem: bool) -> list[bytes] | list[str]:
    tokens: list = _unicode_tokens(text) if tokenizer == "unicode" else _default_tokens(text)
    return _stemmed(tokens) if stem else tokens


def tokenize(text: str, tokenizer: str = "default", stem: bool = False) -> list[str]:
    """The tokens ROUGE compares: rouge-score's tokenizer by default (see the module docs).

    >>> tokenize("The cats' 2 mats!", stem=True)
    ['the', 'cat', '2', 'mat']
    """
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; known: {', '.join(TOKENIZERS)}")
    return [t.decode("ascii") if isinstance(t, bytes) else t
            for t in _tokens(text, tokenizer, stem)]
