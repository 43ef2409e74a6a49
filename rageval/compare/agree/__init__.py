"""``rageval agree``'s statistics: :mod:`.agreement` (:func:`~.agreement.agree_runs`), the runs
or human labels compared (:mod:`.inputs`), the agreement figures (:mod:`.statistics`), the
report's rows (:mod:`.report`) and its tables (:mod:`.output`)."""
