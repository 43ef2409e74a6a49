"""Untrusted text made safe for each kind of channel rageval writes to.

Record ids, answers, judge replies, endpoint error bodies, trace attributes and file paths are
text rageval did not write. Each channel has one function here, and every writer of that
channel calls it on such text (masking known credentials first, :mod:`.masking`):

- :func:`terminal`: control characters, ANSI escapes, Unicode line and paragraph separators,
  bidirectional overrides and lone surrogates shown escaped (``\\x1b``, ``\\n``, ``\\ud800``),
  never emitted; and the two ways a CI runner reads a command from a log line defused by
  construction: GitHub's ``::command::`` (at the start of a line, after blanks) and its legacy
  ``##[command]`` (anywhere in a line). A word joiner (U+2060, invisible) is put between the
  two colons of every ``::`` and after the ``##`` of every ``##[``, so no wrapping or folding
  of the text, wherever it falls, can make a line that starts a command;
- :func:`visible`: the same characters shown escaped, nothing else changed (a plot's labels,
  drawn as shapes: a control character has no glyph);
- :func:`xml_text`: the characters XML 1.0 forbids (control characters other than tab, line
  feed and carriage return, lone surrogates, U+FFFE, U+FFFF) written visibly (``\\x01``);
- :func:`markdown` and :func:`markdown_code`: HTML escaped, ``@mention``, ``#123`` and
  ``GH-123`` references defused, ``|`` escaped and line breaks shown escaped, so a cell never
  breaks a table row;
- :func:`command_data` and :func:`command_property`: a workflow command's message and
  property values escaped as GitHub's runner reads them, and :func:`workflow_command`, the
  whole line.
"""

from __future__ import annotations

import html
import re

from rageval.core.outputs.surrogates import without_lone_surrogates

__all__ = ["command_data", "command_property", "escape_char", "markdown", "markdown_code",
           "terminal", "terminal_lines", "valid_unicode", "visible", "workflow_command",
           "xml_text"]

JOINER = "\u2060"  # WORD JOINER: invisible, not blank to a runner, never a line break

# C0 and C1 controls, DEL, line and paragraph separators, bidirectional embeddings, overrides
# and isolates, and lone surrogates: nothing a terminal may receive raw from untrusted text.
_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# What XML 1.0 forbids (its Char production's complement).
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# A reference GitHub links in Markdown: @user or @org/team, #123, GH-123.
# (An @ inside a word, as in ndcg@3 or an e-mail address, is no mention.)
_MENTION = re.compile(r"((?<![A-Za-z0-9_])@|#|(?<![A-Za-z0-9_])GH-)(?=[A-Za-z0-9])",
                      re.IGNORECASE)
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_char(char: str) -> str:
    """One character as visible text: ``\\n``, ``\\x1b``, ``\\u202e``, ``\\ud800``."""
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _visible(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub(lambda match: escape_char(match.group()), text)


def visible(text: object) -> str:
    """``text`` with what no reader can see shown escaped, as :func:`terminal` shows it, but
    nothing added: for text drawn as shapes (a plot's labels), which no runner reads."""
    return _visible(_TERMINAL_UNSAFE, str(text))


def terminal(text: object) -> str:
    """``text`` as one safe stretch of a terminal line (see the module's docstring)."""
    text = _visible(_TERMINAL_UNSAFE, str(text))
    return text.replace("::", f":{JOINER}:").replace("##[", f"##{JOINER}[")


def terminal_lines(text: object) -> str:
    """``text`` made safe as :func:`terminal` makes it, line by line: its line breaks kept
    (a message of several lines), none of its lines able to start a command."""
    return "\n".join(terminal(line) for line in str(text).split("\n"))


def valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, for a consumer of structured
    text (JSON sent to a server): encodable in UTF-8 whatever it held (the one rule of
    :mod:`.surrogates`)."""
    return without_lone_surrogates(text)


def xml_text(text: object) -> str:
    """``text`` holding only characters XML 1.0 allows (the serializer escapes ``<&>"``)."""
    return _visible(_XML_FORBIDDEN, str(text))


def markdown(text: object) -> str:
    """``text`` as inline GitHub Markdown, in a table cell or not: shown as written, never
    as HTML, a mention, an issue link or a second row."""
    text = _visible(_TERMINAL_UNSAFE, str(text))
    # Markdown's own punctuation (emphasis, strikethrough, code, links, escapes)
    # backslash-escaped, then HTML as entities: nothing untrusted becomes emphasis, a link,
    # code or a tag.
    # (An underscore inside a word never starts emphasis: snake_case paths stay as written.)
    text = re.sub(r"([\\`*\[\]~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))", r"\\\1", text)
    text = _MENTION.sub(lambda match: match.group(1) + JOINER, text)
    return html.escape(text, quote=False).replace("|", "\\|")


def markdown_code(text: object) -> str:
    """``text`` as an inline code span (metric names: copyable as written). Inside a code
    span GitHub shows HTML and mentions as text; a backtick, a line break or a ``|`` would
    end the span, the row or the cell, so they are replaced or escaped."""
    text = _visible(_TERMINAL_UNSAFE, str(text)).replace("`", "'").replace("|", "\\|")
    return f"`{text}`"


def command_data(text: object) -> str:
    """A workflow command's message, escaped as GitHub's runner reads it (line breaks as
    ``%0A``, which the runner turns back into lines of the annotation); other control
    characters shown escaped, as on the terminal."""
    text = str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return _visible(_TERMINAL_UNSAFE, text)


def command_property(text: object) -> str:
    """A workflow command's property value (``title=...``), escaped as the runner reads it."""
    return command_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(kind: str, message: str, **properties: str) -> str:
    """One whole workflow-command line (``::error title=rageval gate::...``); the message and
    the properties escaped, so that nothing in them ends the line or the command."""
    props = ",".join(f"{name}={command_property(value)}" for name, value in properties.items())
    return f"::{kind}{' ' + props if props else ''}::{command_data(message)}"
