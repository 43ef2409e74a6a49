"""URLs as they may be shown or stored: without the credentials they can carry.

A URL can carry a secret in its user info (``http://user:SECRET@host``) or in its query string
(``?api-key=SECRET``); what rageval prints, signs or writes to a manifest holds only the scheme,
host, port and path (:func:`public_url`).
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit, urlunsplit

__all__ = ["has_secrets", "host_port", "public_url"]


def _split(url: str) -> SplitResult:
    """``url`` split; one written without ``//`` (``user:pw@host:6006``, which ``urlsplit``
    reads as a scheme and a path) is split as a network location, so that its user info is
    found; an unparsable one (``http://[::1``) is split as nothing but a scheme."""
    try:
        parts = urlsplit(url)
        if "//" not in url:
            parts = urlsplit("//" + url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        return SplitResult(url.partition(":")[0] if "://" in url else "", "", "", "", "")
    return parts


def public_url(url: str) -> str:
    """``url`` reduced to scheme, host, port and path (no user info, query or fragment)."""
    parts = _split(url.rstrip("/"))
    return urlunsplit((parts.scheme, host_port(parts.netloc), parts.path, "", ""))


def host_port(netloc: str) -> str:
    """The host and port of a URL's network location (its user info dropped)."""
    return netloc.rpartition("@")[2]


def has_secrets(url: str) -> bool:
    """Whether ``url`` carries user info, a query string or a fragment (or cannot be read:
    then nothing of it may be shown)."""
    parts = _split(url)
    if not parts.netloc and not parts.path and url:
        return True
    return "@" in parts.netloc or bool(parts.query) or bool(parts.fragment)
