"""Judge panels: several judges score the same items (``--judge SPEC``, repeatable), and the
panel's value is made from theirs by a rule that counts every abstention
(:mod:`.rules`, :mod:`.metric`, :mod:`.hooks`)."""
