"""What a run looks like to a person: terminal tables and the HTML report.

- :mod:`~rageval.report.tables`: the summary, metric and unscored tables (rich);
- :mod:`~rageval.report.html`: the self-contained HTML report (:func:`build_report`), built
  from the data of :mod:`~rageval.report.html_data`, the sections of ``html_sections``,
  ``html_comparison`` and ``html_records``, the markup helpers of ``html_markup`` and the plots
  of ``html_plots``; its CSS and JS in ``assets/``.
"""
