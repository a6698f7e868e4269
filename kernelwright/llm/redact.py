"""Keep secrets out of anything written down: logs, error messages, cassettes, the run store.

Keys never enter spec strings or files by design; these helpers cover the two leaks that remain:
credentials embedded in a base URL, and servers that echo the key back inside an error body.
"""
from __future__ import annotations

import re
from typing import Iterable
from urllib.parse import urlsplit, urlunsplit

_MASK = "***"
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6,}|sk-ant-[A-Za-z0-9_\-]{6,})")


def redact_url(url: str) -> str:
    """Drop user:password@ and the query string from a URL (both can hold keys)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _MASK
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    query = _MASK if parts.query else ""
    return urlunsplit((parts.scheme, host, parts.path, query, ""))


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Replace every known secret value, and anything shaped like an OpenAI/Anthropic key."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, _MASK)
    return _KEYLIKE.sub(_MASK, text)
