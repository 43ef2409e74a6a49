"""One hostile corpus: text rageval did not write, as record ids, answers, judge replies,
endpoint error bodies, trace attributes and file paths may hold it."""

from __future__ import annotations

import html.parser
import re

__all__ = ["CORPUS", "HOSTILE", "LONG", "live_mentions", "raw_html_tags"]

HOSTILE = ("x\n::error::injected by text%0A::add-mask::masked\r::warning::cr "
           "::stop-commands::TOKEN \x01\x02 \x1b[2J ]]> <img src=x onerror=alert(1)> "
           "@someone #1 a|b ##[error]legacy \u2028::notice::ls \u202eevil")
LONG = "::error::long " + "y" * 100_000 + " ::add-mask::end"

CORPUS = [
    HOSTILE,
    "\n::error::at the start",
    "::stop-commands::TOKEN",
    "%0A::error::encoded",
    "\x01\x02\x1b[2J",
    "lone \ud800 surrogate",
    "]]>",
    "<img src=x onerror=alert(1)>",
    "@someone #1 |",
    "a\r\nb",
    "##[add-mask]x",
    LONG,
]


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def raw_html_tags(rendered: str, allowed: frozenset[str]) -> list[str]:
    """The tags of rendered HTML that are not among ``allowed`` (those Markdown makes)."""
    parser = _Tags()
    parser.feed(rendered)
    return [tag for tag in parser.tags if tag not in allowed]


def live_mentions(rendered: str) -> list[str]:
    """``@user`` and ``#123`` references GitHub would link in rendered HTML's text (outside
    code spans)."""
    text = re.sub(r"<code>.*?</code>", "", rendered, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    import html as html_module

    text = html_module.unescape(text)
    return re.findall(r"(?<![\w`])[@#][A-Za-z0-9]", text)
