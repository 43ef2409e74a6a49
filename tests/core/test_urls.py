"""URLs as they may be shown: no user info or query, whatever the URL looks like (one written
without ``//`` included, which the standard parser reads as a scheme and a path)."""

from __future__ import annotations

import pytest

from rageval.core.urls import has_secrets, public_url


@pytest.mark.parametrize(("url", "shown", "secret"), [
    ("http://u:S3CRET@h:1/x?key=S3CRET", "http://h:1/x", True),
    ("admin:S3CRET@phoenix.internal:6006", "//phoenix.internal:6006", True),
    ("http://[::1", "http://", True),
    ("http://localhost:abc", "http://", True),
    ("https://api.openai.com/v1/", "https://api.openai.com/v1", False),
    ("http://127.0.0.1:6006", "http://127.0.0.1:6006", False),
])
def test_public_url_drops_every_secret(url: str, shown: str, secret: bool) -> None:
    assert public_url(url) == shown and "S3CRET" not in public_url(url)
    assert has_secrets(url) is secret
