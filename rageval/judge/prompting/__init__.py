"""The text that goes into a judge's prompt and comes back from it, shared by the rubric judge,
the pairwise judge and the claim-level steps: :mod:`.prompt_files` (the built-in prompt files,
their tables, templates and hashes), :mod:`.slots` (untrusted texts in escaped, nonce-tagged
slots), :mod:`.reply_json` (a reply's JSON verdicts, read tolerantly) and :mod:`.tampering`
(judged texts aimed at the judge, and reasoning copied from them)."""
