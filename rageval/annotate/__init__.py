"""``rageval annotate``: human labels of a judged run, given one record at a time in a local
web page and appended to a labels file (:mod:`rageval.core.labels`).

* :mod:`~rageval.annotate.run`: the judged run it labels (records, scores, the rubric);
* :mod:`~rageval.annotate.uncertainty`: how unsure the judge was of each score;
* :mod:`~rageval.annotate.walk`: the order of the walk and, when active, its draw;
* :mod:`~rageval.annotate.queue`: one annotator's queue, written to the labels file;
* :mod:`~rageval.annotate.api`: the JSON API; :mod:`~rageval.annotate.page`: the page;
* :mod:`~rageval.annotate.server`: the local server, with its token;
* :mod:`~rageval.annotate.command`: the command that puts them together.
"""
