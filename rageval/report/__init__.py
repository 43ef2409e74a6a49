"""What a run looks like to a person: terminal tables and the HTML report.

- :mod:`~rageval.report.tables`: the summary, metric and unscored tables (rich);
- :mod:`~rageval.report.html`: the self-contained HTML report; its CSS and JS in ``assets/``.
"""
