"""The ground floor: what every other part of rageval stands on, importing none of them.

- :mod:`~rageval.core.records`: the record model, its loaders and file:line validation;
- :mod:`~rageval.core.names`: the metric-name grammar (``parse(str(name)) == name``);
- :mod:`~rageval.core.metric`: the metric base class, its parameters and its lifecycle hooks;
- :mod:`~rageval.core.registry`: the name -> metric table;
- :mod:`~rageval.core.signature`: signatures of scored values;
- :mod:`~rageval.core.results`: the results of a run and their files;
- :mod:`~rageval.core.errors` and :mod:`~rageval.core.files` (atomic writes).
"""
