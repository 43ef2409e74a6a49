"""ROUGE (Lin 2004): n-gram and longest-common-subsequence overlap between answer and reference.

Every value is identical, bit for bit, to Google's ``rouge-score`` 0.1.2 with its default
tokenizer: ``RougeScorer([type], use_stemmer=stem).score(target=reference, prediction=answer)``
for one reference, ``score_multi`` for several. The code is rageval's own and faster: each text
is tokenised once per batch and shared by every ROUGE metric of that batch, n-gram overlaps are
counted for the whole batch at once, and the LCS length is computed bit-parallel (Allison & Dix
1986, Hyyrö 2004) instead of with a quadratic table.

Metrics: ``rouge1``, ``rouge2``, any ``rougeN`` (``rouge3``, ``rouge4``, ...), ``rougeL``
(LCS over the whole text) and ``rougeLsum`` (summary-level LCS over newline-separated
sentences). Each writes its F-measure as the headline value plus the components
``<name>.precision``, ``<name>.recall`` and ``<name>.fmeasure``. Their parameters (``stem``,
``tokenizer``) are described in :mod:`~.metric`.

- :mod:`~.metric`: the registered metrics and their base class: parameters, signature, and
  the step from counts to values;
- :mod:`~.tokenization`: the tokenizers and stemming; :mod:`~.pairs`: a batch's pairs,
  tokenised once;
- :mod:`~.ngrams`: n-gram overlap counts; :mod:`~.lcs`: LCS and summary-level LCS counts.
"""

from rageval.generation.rouge.lcs import lcs_indices, lcs_lengths, summary_lcs, summary_lcs_hits
from rageval.generation.rouge.metric import (  # registers the metrics
    ROUGE_SCORE_SEMANTICS,
    Rouge,
    Rouge1,
    Rouge2,
    RougeL,
    RougeLsum,
    RougeN,
    best_reference,
    prf,
    rouge_n_class,
)
from rageval.generation.rouge.ngrams import ngram_overlap
from rageval.generation.rouge.pairs import batch_pairs
from rageval.generation.rouge.tokenization import TOKENIZERS, Token, tokenize

__all__ = [
    "ROUGE_SCORE_SEMANTICS",
    "TOKENIZERS",
    "Rouge",
    "Rouge1",
    "Rouge2",
    "RougeL",
    "RougeLsum",
    "RougeN",
    "Token",
    "batch_pairs",
    "best_reference",
    "lcs_indices",
    "lcs_lengths",
    "ngram_overlap",
    "prf",
    "rouge_n_class",
    "summary_lcs",
    "summary_lcs_hits",
    "tokenize",
]
