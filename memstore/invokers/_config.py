"""Invoker settings: arguments first, then the usual environment variables, checked up front."""

from __future__ import annotations

import math
import os
from urllib.parse import urlsplit

from memstore.errors import InvokerConfigError

__all__ = ["InvokerConfigError", "api_key_for", "http_url", "positive", "setting"]

# Hosts that refuse every request without a key; anything else (Ollama, vLLM, a proxy) may not.
KEYED_HOSTS = frozenset({"api.openai.com", "api.anthropic.com"})


def setting(value: str | None, variable: str, default: str | None = None) -> str | None:
    """`value` if given, else the environment variable (blank counts as unset), else `default`."""
    if value is not None:
        return value
    return os.environ.get(variable, "").strip() or default


def http_url(url: str, variable: str) -> str:
    """`url` without a trailing slash, after checking that it is an absolute http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvokerConfigError(
            f"{url!r} is not an http:// or https:// URL; pass base_url=... or set {variable}"
        )
    return url.rstrip("/")


def api_key_for(url: str, api_key: str | None, variable: str) -> str | None:
    """The key to send to `url`; a host that needs a key and has none is refused here."""
    if api_key:
        return api_key
    host = urlsplit(url).hostname
    if host in KEYED_HOSTS:
        raise InvokerConfigError(f"{host} needs an API key: pass api_key=... or set {variable}")
    return None


def positive(name: str, value: float, *, zero_ok: bool = False) -> float:
    """`value` if it is a positive number (or zero, when allowed); a clear error otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvokerConfigError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not zero_ok):
        bound = "zero or more" if zero_ok else "more than zero"
        raise InvokerConfigError(f"{name} must be {bound}, got {value!r}")
    return float(value)
