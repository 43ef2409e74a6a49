"""How a run's batches are scored and where their results go: the per-record results' sinks
(:mod:`.sink`), local and Ray execution; the summary's parts kept as the batches finish are
:mod:`rageval.summary`'s. A run read window by window holds one window of records at a time."""
