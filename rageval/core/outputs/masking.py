"""Every credential a run knows, masked in every text it writes.

A server may echo what it was sent: the API key (``Authorization: Bearer KEY``), the user
name and password of a URL's user info (``Authorization: Basic base64(user:password)``, as the
HTTP client sends them), a key in the query string. A :class:`Masker` holds one run's secrets,
in every form in which they travel, and replaces each with ``***`` wherever it appears. A run
builds its own from its options and environment (the command line:
:func:`rageval.cli.secrets.run_masker`) and hands it to its writers: there is no registry of
secrets shared by the process.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus, urlsplit

__all__ = ["MASK", "NO_SECRETS", "Masker", "url_secrets"]

MASK = "***"
MIN_SECRET = 4  # shorter values (a port, "1") would mask innocent text everywhere


def url_secrets(url: str | None) -> tuple[str, ...]:
    """What a URL carries that must never be shown: its password (as written and
    percent-decoded; the user name where it stands alone, a token), the HTTP Basic form of its
    user info, and its query values (as written and decoded)."""
    if not url:
        return ()
    try:
        parts = urlsplit(url if "//" in url else "//" + url)
    except ValueError:
        return (url,)  # unreadable: the whole URL is the secret
    values = [pair.partition("=")[2] for pair in parts.query.split("&")]
    found = [*values, *map(unquote_plus, values)]
    if parts.username is not None or parts.password is not None:
        user, password = parts.username or "", parts.password or ""
        # A user name beside a password is no secret (masking "admin" would mask the word in
        # every text); alone in the user info it is a token, the credential itself.
        found += [password, unquote(password) if password else unquote(user),
                  basic_token(unquote(user), unquote(password))]
        if not password:
            found.append(user)
    return tuple(found)


def basic_token(user: str, password: str) -> str:
    """``base64(user:password)``: what ``Authorization: Basic`` sends (UTF-8, as httpx)."""
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


@dataclass(frozen=True)
class Masker:
    """One run's secrets, longest first (a secret holding another is masked whole)."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str | None]) -> Masker:
        """The secrets among ``values`` (None, empty and too short ones left out)."""
        kept = {value for value in values if value and len(value) >= MIN_SECRET}
        return cls(tuple(sorted(kept, key=lambda v: (-len(v), v))))

    def __add__(self, other: Masker) -> Masker:
        return Masker.of((*self.secrets, *other.secrets))

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def __repr__(self) -> str:  # never the secrets themselves
        return f"Masker({len(self.secrets)} secrets)"


#: The masker of a writer told of no secret: it changes nothing.
NO_SECRETS = Masker()
