"""The ground floor: what every other part of rageval stands on, importing none of them.

- :mod:`~rageval.core.records`: loading records (:func:`load_records`), with the record model
  in :mod:`~rageval.core.records.model` and the file readers (JSONL, JSON, CSV, Parquet) in
  :mod:`~rageval.core.records.readers`;
- :mod:`~rageval.core.names`: the metric-name grammar (``parse(str(name)) == name``);
- :mod:`~rageval.core.metric`: the metric base class, its parameters and its run lifecycle
  (:class:`RunHooks`); :mod:`~rageval.core.providers`: what fills in judgments
  (:class:`JudgmentsProvider`);
- :mod:`~rageval.core.registry`: the name -> metric table and the built-in families;
- :mod:`~rageval.core.signature`: signatures of scored values;
- :mod:`~rageval.core.results`: the results of a run and their files;
- :mod:`~rageval.core.errors`, :mod:`~rageval.core.files` (atomic writes),
  :mod:`~rageval.core.version`.
"""

import copyreg
from types import MappingProxyType


def read_only(mapping: dict) -> MappingProxyType:
    """A read-only view of ``mapping`` (what an unpickled read-only mapping is rebuilt with)."""
    return MappingProxyType(mapping)


def _reduce_read_only(mapping: MappingProxyType) -> tuple[object, tuple[dict]]:
    return read_only, (dict(mapping),)


# Records and metrics travel to worker processes by pickle (the Ray engine); the read-only
# mappings they hold travel as the dicts they wrap and come back read-only.
copyreg.pickle(MappingProxyType, _reduce_read_only)
