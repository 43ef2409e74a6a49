"""URLs as they may be shown or stored: without the credentials they can carry.

A URL can carry a secret in its user info (``http://user:SECRET@host``) or in its query string
(``?api-key=SECRET``); what rageval prints, signs or writes to a manifest holds only the scheme,
host, port and path (:func:`public_url`).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["has_secrets", "host_port", "public_url"]


def public_url(url: str) -> str:
    """``url`` reduced to scheme, host, port and path (no user info, query or fragment)."""
    parts = urlsplit(url.rstrip("/"))
    return urlunsplit((parts.scheme, host_port(parts.netloc), parts.path, "", ""))


def host_port(netloc: str) -> str:
    """The host and port of a URL's network location (its user info dropped)."""
    return netloc.rpartition("@")[2]


def has_secrets(url: str) -> bool:
    """Whether ``url`` carries user info, a query string or a fragment."""
    parts = urlsplit(url)
    return "@" in parts.netloc or bool(parts.query) or bool(parts.fragment)
