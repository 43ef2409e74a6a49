"""The labelling page: one static HTML document (``assets/annotate.html``) with its style and
script inlined, and the Content-Security-Policy it is served with.

The page holds no record: its script fetches each one from the JSON API and inserts every text
with ``textContent``, never as markup. The policy is the HTML report's (only the page's own
script runs, allowed by its SHA-256; no fetch of any asset; inline styles) plus what a page that
talks to its server needs: requests to its own origin (``connect-src 'self'``); it may not be
framed by another page."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from importlib import resources

__all__ = ["Page", "load_page"]

_STYLE_SLOT = "<!-- style -->"
_SCRIPT_SLOT = "<!-- script -->"


@dataclass(frozen=True)
class Page:
    """The page's bytes and the policy they are served with."""

    html: bytes
    policy: str


def load_page() -> Page:
    template = _asset("annotate.html")
    script = _asset("annotate.js")
    html = template.replace(_STYLE_SLOT, f"<style>\n{_asset('annotate.css')}</style>") \
        .replace(_SCRIPT_SLOT, f"<script>{script}</script>")
    return Page(html.encode("utf-8"), policy(script))


def policy(script: str) -> str:
    """The Content-Security-Policy of a page whose one script is ``script``."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
            "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")


def _asset(name: str) -> str:
    return resources.files("rageval.annotate").joinpath("assets", name) \
        .read_text(encoding="utf-8")
