"""Records and TREC files as one columnar (CSR) ranking, the input of every retrieval metric.

- :mod:`.structure`: :class:`Ranking`, built from record lists or from TREC files;
- :mod:`.arrays`: the grade codes and CSR helpers the other modules share;
- :mod:`.trec_order`: trec_eval's ranking order of a run file's lines;
- :mod:`.trec_grades`: the grade of every ranked document, and trec_eval's duplicate checks.
"""

from rageval.retrieval.ranking.arrays import NOT_JUDGED, TE_NONPOOL, TE_UNJUDGED, fast_allocation
from rageval.retrieval.ranking.structure import Ranking

__all__ = ["NOT_JUDGED", "TE_NONPOOL", "TE_UNJUDGED", "Ranking", "fast_allocation"]
