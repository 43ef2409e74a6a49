"""What rageval writes for others to read: text made safe for each kind of channel (terminal,
XML, Markdown, CI workflow commands, with every known credential masked) and a run directory
that changes in one atomic step."""
