"""Model invokers: the ModelInvoker implementations memstore ships, for `summarize` and `compact`.

- `openai_compatible(base_url, model, api_key)` streams Chat Completions from OpenAI or any server
  that speaks its API (vLLM, Ollama, LM Studio, LiteLLM). Reads `OPENAI_API_KEY` and
  `OPENAI_BASE_URL` (default `https://api.openai.com/v1`); without a key it sends no
  Authorization header, which local servers accept.
- `anthropic(model, api_key)` streams Anthropic's Messages API. Reads `ANTHROPIC_API_KEY` and
  `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`).
- `extractive(max_chars)` needs no model and no network: a deterministic summary extracted from the
  transcript (the first request, the tools called, the last answer). For tests, offline use and as
  a fallback.

The HTTP invokers need httpx, the `models` extra (`pip install 'memstore-sql[models]'`). They retry
408/429/5xx answers, timeouts and connection errors until the first event, and report every
failure as one terminal StreamError instead of raising.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memstore.errors import MissingExtraError
from memstore.invokers._config import InvokerConfigError
from memstore.invokers._extractive import extractive

if TYPE_CHECKING:
    from memstore.invokers._anthropic import anthropic
    from memstore.invokers._openai import openai_compatible

__all__ = ["InvokerConfigError", "anthropic", "extractive", "openai_compatible"]

_NEED_HTTPX = {
    "anthropic": "memstore.invokers._anthropic",
    "openai_compatible": "memstore.invokers._openai",
}


def __getattr__(name: str) -> Any:
    """Import an HTTP invoker on first use: it needs httpx, from the `models` extra."""
    module_name = _NEED_HTTPX.get(name)
    if module_name is None:
        raise AttributeError(f"module 'memstore.invokers' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MissingExtraError(f"memstore.invokers.{name}", "models", exc) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value
