"""The rubric judge, ``judge:<rubric>``: :mod:`.rubrics` (the rubric files), :mod:`.render` (a
record rendered to chat messages), :mod:`.parsing` and :mod:`.logprobs` (a reply read into a
score), :mod:`.metric` (the metric), :mod:`.hooks` (its run's checks and manifest section) and
:mod:`.judgments` (context grades as a record's judgments, ``--judgments-from judge``)."""
