"""Statistics every run's summary and every comparison rests on: :mod:`.resampling` (the seeded
bootstrap of means and corpus figures, paired bootstrap and randomization tests, Holm's
correction) and :mod:`.ppi` (judge means calibrated by human labels, prediction-powered
inference). It sits right above :mod:`rageval.core`, below the engine, the gate and
``compare``, which all use it."""
