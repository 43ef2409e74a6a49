"""The judge's reply cache: :mod:`.store` (the SQLite store), :mod:`.entries` (keys, entries,
canonical JSON) and :mod:`.jsonl` (the JSONL export)."""
