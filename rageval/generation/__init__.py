"""Generation metrics: an answer against its references.

- :mod:`~rageval.generation.rouge`: ROUGE-N and ROUGE-L (rouge-score parity);
- :mod:`~rageval.generation.bleu`: BLEU, sentence and corpus (sacrebleu);
- :mod:`~rageval.generation.bertscore`: BERTScore P/R/F1 (bert-score parity).
"""
