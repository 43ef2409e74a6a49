"""``rageval compare``'s statistics: :mod:`.compare` (:func:`~.compare.compare_runs`), runs
loaded and paired by record id (:mod:`.pairing`), each metric's paired difference, interval
and test (:mod:`.statistics`), and the tables and JSON (:mod:`.output`)."""
