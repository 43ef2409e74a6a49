"""Endpoint URLs without their secrets.

A base URL can carry credentials: user info (``http://user:SECRET@host/v1``) or a key in the
query string (``...?api-key=SECRET``, as some gateways take it). :class:`Endpoint` keeps the URL
as given for the HTTP client and offers only redacted forms to everything that prints or
stores: :attr:`Endpoint.public` (scheme, host, port and path: what signatures, manifests and
the judge cache hold) and :attr:`Endpoint.shown` (user info and query values masked, for
messages). :meth:`Endpoint.redact` masks the secrets wherever an error text echoes them, in
every form they travel in: as written, percent-decoded, and the HTTP Basic token
``base64(user:password)`` that a server echoing the ``Authorization`` header sends back.

What authenticates a request: the API key, as ``Authorization: Bearer <key>``, unless the URL
carries user info, which the HTTP client (httpx) sends as ``Authorization: Basic`` instead, so
that the key is not sent at all (a gateway behind Basic auth works; an API that wants the key
does not). :meth:`Endpoint.credentials` says which, in the words a 401 error uses.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from rageval.core.errors import UsageError
from rageval.core.outputs.masking import MASK, Masker, url_secrets
from rageval.core.urls import host_port, public_url

__all__ = ["DEFAULT_BASE_URL", "MASK", "Endpoint", "api_key_problem", "public_url"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class Endpoint:
    """One OpenAI-compatible base URL, split into what may be shown and what may not."""

    url: str = field(repr=False)

    def __post_init__(self) -> None:
        try:
            parts = urlsplit(self.url)
        except ValueError:  # an unclosed "[" of an IPv6 host: nothing of it may be shown
            raise UsageError("judge base URL cannot be read as a URL (shown as ***: it may "
                             "hold credentials)") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(
                f"judge base URL must be an http(s) URL with a host, got {public_url(self.url)!r}"
            )
        try:
            parts.port  # noqa: B018  (raises on a port that is not a number)
        except ValueError:
            raise UsageError(f"judge base URL has a bad port: {public_url(self.url)!r}") from None

    @classmethod
    def of(cls, url: str | None) -> Endpoint:
        return cls((url or DEFAULT_BASE_URL).rstrip("/"))

    def __repr__(self) -> str:
        return f"Endpoint({self.shown!r})"

    @property
    def public(self) -> str:
        """Scheme, host, port and path: no user info, no query (signatures, cache, manifest)."""
        return public_url(self.url)

    @property
    def shown(self) -> str:
        """The URL with user info and query values masked (for messages)."""
        parts = urlsplit(self.url)
        netloc = host_port(parts.netloc)
        if "@" in parts.netloc:
            netloc = f"{MASK}@{netloc}"
        query = "&".join(f"{name}={MASK}" for name, _ in parse_qsl(parts.query,
                                                                    keep_blank_values=True))
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))

    @property
    def base_url(self) -> str:
        """The URL without its query, for the HTTP client (which appends paths to it)."""
        parts = urlsplit(self.url)
        return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))

    @property
    def query(self) -> dict[str, str]:
        """The query parameters, sent with every request (a key some gateways take there)."""
        return dict(parse_qsl(urlsplit(self.url).query, keep_blank_values=True))

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every value that must never be shown: user name, password (as written, decoded
        and as their Basic token) and query values, longest first."""
        return Masker.of(url_secrets(self.url)).secrets

    def credentials(self, api_key_env: str) -> str:
        """What is sent to authenticate, in words. User info in the URL wins: the HTTP client
        sends it as Basic auth in place of the API key's Bearer header."""
        if "@" in urlsplit(self.url).netloc:
            return ("the user name and password in the base URL (sent as HTTP Basic auth, in "
                    f"place of the API key in ${api_key_env})")
        return f"the API key in ${api_key_env} (sent as a Bearer token)"

    def redact(self, text: str) -> str:
        """``text`` with the full URL and every secret of it masked."""
        return Masker(self.secrets)(text.replace(self.url, self.shown))


def api_key_problem(api_key_env: str, base_url: str | None) -> str | None:
    """Why a judge at ``base_url`` cannot be asked with the key in ``$api_key_env``, or None.

    OpenAI's own endpoint needs a key; another endpoint (vLLM, Ollama, llama.cpp) may not.
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env or ""):
        return f"not an environment variable name: {api_key_env!r}"
    if base_url is None and not os.environ.get(api_key_env):
        return (f"no API key: set the environment variable {api_key_env} "
                "(or point --judge-base-url at an endpoint that needs none)")
    return None


