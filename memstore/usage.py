"""What a model call cost, stored beside the node it produced (the `node_usage` table).

Usage is never part of a turn: a node's id and its JSONL lines are the same with or without it.
A native session's usage travels in its JSONL export as a line of its own,
`{"type":"usage","node":"<id>","usage":{...}}`, which readers of the legacy format skip (they
ignore unknown record types) and an import into memstore reads back into `node_usage`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from memstore import jsjson
from memstore.errors import InvalidArgumentError
from memstore.estimate import estimate_context_tokens
from memstore.types import TurnLike, is_storable_text

__all__ = [
    "MAX_TOKENS",
    "USAGE_RECORD",
    "NodeUsage",
    "estimate_with_usage",
    "from_anthropic",
    "from_openai_agents",
    "parse_usage",
    "usage_from_record",
    "usage_record",
]

USAGE_RECORD = "usage"
"""The `type` of the JSONL line that carries a node's usage."""

MAX_TOKENS = 2**53 - 1
"""The most tokens a usage field takes on the way in: the largest integer JSON carries exactly
between JavaScript and Python (`Number.MAX_SAFE_INTEGER`). The sums of such fields may pass
2**63 - 1 (1,025 turns): the listings sum them so that they cannot fail (`usage_sum` of
`memstore.store.plans.usage_rollup`)."""

_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
_TEXTS = ("model", "provider")
_WIRE = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "cache_read_tokens": "cacheReadTokens",
    "cache_write_tokens": "cacheWriteTokens",
    "cost_usd": "costUsd",
    "model": "model",
    "provider": "provider",
}
_FROM_WIRE = {wire: name for name, wire in _WIRE.items()}


@dataclass(frozen=True)
class NodeUsage:
    """What the model call behind a node consumed: tokens (input, output, cache reads and
    writes), its cost in US dollars, and the model and provider. Every field is optional."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    model: str | None = None
    provider: str | None = None

    def __post_init__(self) -> None:
        for name in _TOKENS:
            value = getattr(self, name)
            if value is not None and (type(value) is not int or not 0 <= value < 2**63):
                raise InvalidArgumentError(
                    f"usage field {name!r} is a whole number of tokens >= 0, not {value!r}"
                )
        cost = self.cost_usd
        if cost is not None and (
            isinstance(cost, bool)
            or not isinstance(cost, int | float)
            or not math.isfinite(cost)
            or cost < 0
        ):
            raise InvalidArgumentError(
                f"usage field 'cost_usd' is a finite number >= 0, not {cost!r}"
            )
        for name in _TEXTS:
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and is_storable_text(value)):
                raise InvalidArgumentError(
                    f"usage field {name!r} is a string without NUL or lone surrogates (which "
                    f"a database cannot store), not {value!r}"
                )

    def row(self) -> dict[str, Any]:
        """The `node_usage` columns (but the session and node)."""
        values = {field.name: getattr(self, field.name) for field in fields(self)}
        if values["cost_usd"] is not None:
            values["cost_usd"] = float(values["cost_usd"])
        return values

    def wire(self) -> dict[str, Any]:
        """The camelCase object of a usage line, without the fields that are None."""
        return {
            _WIRE[field.name]: value
            for field in fields(self)
            if (value := getattr(self, field.name)) is not None
        }


def parse_usage(value: NodeUsage | Mapping[str, Any]) -> NodeUsage:
    """A `NodeUsage` from itself or a mapping of its fields (snake_case, or the camelCase of a
    usage line).

    Raises:
        InvalidArgumentError: not a mapping, an unknown field, or a value of the wrong type,
            naming the field.
    """
    if isinstance(value, NodeUsage):
        return _within_max_tokens(value)
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"usage is a NodeUsage or a mapping of its fields, not {type(value).__name__}"
        )
    known: dict[str, Any] = {}
    for key, item in value.items():
        name = key if key in _WIRE else _FROM_WIRE.get(key)
        if name is None:
            raise InvalidArgumentError(f"usage has no field {key!r} (known: {', '.join(_WIRE)})")
        known[name] = item
    return _within_max_tokens(NodeUsage(**known))


def _within_max_tokens(usage: NodeUsage) -> NodeUsage:
    """`usage`, if no token field is above `MAX_TOKENS` (a stored row, read back as a
    `NodeUsage`, may hold more: what was stored before the limit stays readable)."""
    for name in _TOKENS:
        value = getattr(usage, name)
        if value is not None and value > MAX_TOKENS:
            raise InvalidArgumentError(
                f"usage field {name!r} is at most {MAX_TOKENS} tokens (2**53 - 1), not {value!r}"
            )
    return usage


def cost_total(total: Any) -> float:
    """A sum of costs in USD as memstore reports it: to a billionth of a dollar, since a sum of
    floats drifts below that (1,500 x 0.001 sums to 1.4999999999999456); 0.0 for no costs."""
    return round(float(total or 0), 9)


def usage_record(node_id: str, usage: NodeUsage) -> str:
    """The JSONL line (without its newline) that carries `usage` for node `node_id`."""
    return jsjson.dumps({"type": USAGE_RECORD, "node": node_id, "usage": usage.wire()})


def usage_from_record(record: Mapping[str, Any]) -> tuple[str, NodeUsage] | None:
    """The node id and usage a parsed JSONL record carries, or None for a record of another
    type.

    Raises:
        InvalidArgumentError: a usage record whose node or fields are malformed.
    """
    if record.get("type") != USAGE_RECORD:
        return None
    node, usage = record.get("node"), record.get("usage")
    if not isinstance(node, str) or not isinstance(usage, Mapping):
        raise InvalidArgumentError("a usage line names its node (a string) and a usage object")
    return node, parse_usage(usage)


def estimate_with_usage(turns: Sequence[TurnLike], usages: Sequence[NodeUsage | None]) -> int:
    """A usage-aware token estimate of `turns` (a path, oldest first; `usages` one entry per
    turn): the context a provider last reported on the path (its input, cache-read and
    cache-write tokens, plus its output tokens, or the character rule for that turn when it
    reported none), then the seed's character rule (`estimate_context_tokens`) for the turns
    after it. Without any reported input it is the character rule alone.

    `input_tokens` counts the input not read from cache (Anthropic's and pi's convention;
    the OpenAI Agents adapter subtracts cached tokens), so the three input counts add up.
    """
    if len(usages) != len(turns):
        raise InvalidArgumentError(f"one usage per turn: {len(usages)} for {len(turns)} turns")
    for position in range(len(turns) - 1, -1, -1):
        usage = usages[position]
        if usage is None or usage.input_tokens is None:
            continue
        reported = (
            usage.input_tokens + (usage.cache_read_tokens or 0) + (usage.cache_write_tokens or 0)
        )
        if usage.output_tokens is not None:
            reported += usage.output_tokens
        else:
            reported += estimate_context_tokens([turns[position]])
        return reported + estimate_context_tokens(turns[position + 1 :])
    return estimate_context_tokens(turns)


def _count(value: Any) -> int | None:
    """A token count a provider reported, or None for anything that is not one."""
    return value if type(value) is int and value >= 0 else None


def from_anthropic(usage: Any, model: Any = None) -> NodeUsage | None:
    """The usage of an Anthropic message (a Claude Code or Claude Agent SDK entry's
    `message.usage`), or None when it reports no tokens."""
    if not isinstance(usage, Mapping):
        return None
    found = NodeUsage(
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_tokens=_count(usage.get("cache_read_input_tokens")),
        cache_write_tokens=_count(usage.get("cache_creation_input_tokens")),
        model=model if isinstance(model, str) else None,
        provider="anthropic",
    )
    return None if found.input_tokens is None and found.output_tokens is None else found


def from_openai_agents(
    usage: Any, *, model: str | None = None, cost_usd: float | None = None
) -> NodeUsage:
    """The OpenAI Agents SDK's `Usage` (a run's `context_wrapper.usage`) as a `NodeUsage`:
    input tokens read from or written to the cache (which OpenAI counts in `input_tokens`) are
    moved to `cache_read_tokens` and `cache_write_tokens`.

    Raises:
        InvalidArgumentError: `usage` has no whole `input_tokens` and `output_tokens`.
    """
    inputs = _count(getattr(usage, "input_tokens", None))
    outputs = _count(getattr(usage, "output_tokens", None))
    if inputs is None or outputs is None:
        raise InvalidArgumentError(
            f"expected the OpenAI Agents SDK's Usage (input_tokens, output_tokens), not {usage!r}"
        )
    details = getattr(usage, "input_tokens_details", None)
    cached = _count(getattr(details, "cached_tokens", None)) or 0
    written = _count(getattr(details, "cache_write_tokens", None))
    return NodeUsage(
        input_tokens=max(inputs - cached - (written or 0), 0),
        output_tokens=outputs,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        cost_usd=cost_usd,
        model=model,
        provider="openai",
    )
