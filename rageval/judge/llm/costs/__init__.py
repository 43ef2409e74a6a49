"""What a run's judge requests cost, before and while they are sent: counting a request's
prompt tokens (:mod:`.tokens`), a dry run's plan (:mod:`.plan`), and the run's caps
(:mod:`.budget`)."""
