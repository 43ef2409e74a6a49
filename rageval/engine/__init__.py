"""How a run's batches are scored and where their results go: the summary's parts kept as
the batches finish (:mod:`.summary`) and the per-record results' sinks (:mod:`.sink`), so a run
read window by window holds one window of records at a time."""
