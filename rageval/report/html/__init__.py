"""The self-contained HTML report (``rageval report``): :mod:`.page` builds and writes it
(:func:`~.page.build_report`, :func:`~.page.write_report`) from its sections: the summary and
distributions (:mod:`.sections`), the comparison (:mod:`.comparison`), the records
(:mod:`.records`, with :mod:`.claims`), with :mod:`.data`, :mod:`.plots` and :mod:`.markup`
beneath them."""
