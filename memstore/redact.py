"""Redaction before storing: a store's `redact=` runs on every turn before it is hashed.

A `Redactor` takes a `Turn` and returns the turn to store: the same turn when there is nothing to
hide, or a new one. `SessionStore(..., redact=...)` runs it on every turn that enters the store
(appends, batches, keyed appends, handles and the adapters that write through them, imports, and
compaction's summaries), so the node's id is the content address of the redacted turn: the same
as appending the redacted turn directly.

`secrets()` is a ready-made redactor for common secrets (API keys, bearer tokens, private keys,
passwords in URLs, JWTs): each is replaced by a marker such as `[REDACTED:openai-key]`. It reads
every string of the turn (text, thinking, tool inputs and outputs at any depth, strings that hold
JSON, unknown blocks) except those that are not content: a block's `kind`, a tool call's `id`, a
result's `callId`, an image's data and media type, and every signature or opaque provider field
(`SIGNATURE_KEYS`), which providers check byte for byte.

The patterns are a small set of regular expressions, one per secret's documented shape, rather
than a scanner such as detect-secrets: those report which lines of a file look secret (by
entropy, per line), where a store needs the exact span of each secret inside any string, to
replace it and keep every other character.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from memstore.errors import InvalidArgumentError, InvalidTurnError
from memstore.types import Turn, parse_turn

__all__ = [
    "PATTERNS",
    "SIGNATURE_KEYS",
    "Redactor",
    "SecretRedactor",
    "apply_redactor",
    "redact_secrets",
    "redact_text",
    "secrets",
]

Redactor: TypeAlias = Callable[[Turn], Turn]
"""What a store's `redact=` takes: the turn as given, the turn to store (or the same one)."""

SIGNATURE_KEYS = frozenset(
    {
        "signature",
        "thoughtSignature",
        "thought_signature",
        "encrypted_content",
        "encryptedContent",
        "redacted_data",
        "redactedData",
    }
)
"""Keys whose values are opaque provider data, never changed at any depth (a thinking block's
`signature`, OpenAI's `encrypted_content`, Gemini's `thoughtSignature`, ...); so is any key
ending in `signature` or `Signature`."""

_BLOCK_KEYS_KEPT = frozenset({"kind", "id", "callId", "mediaType", "dataBase64", "isError"})
"""A block's own keys that are no content: its kind, ids, an image's data."""

_NO_WORD_BEFORE = r"(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrtbf]))"
"""No letter, digit, `_` or `-` before, unless it ends an escape (`\\n`: inside a JSON string)."""
_NO_WORD_AFTER = r"(?![A-Za-z0-9_\-])"

PATTERNS: dict[str, str] = {
    "private-key": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r".*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    ),
    "anthropic-key": _NO_WORD_BEFORE + r"sk-ant-[A-Za-z0-9_\-]{20,}",
    "openai-key": _NO_WORD_BEFORE + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    "stripe-key": _NO_WORD_BEFORE + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    "aws-access-key": _NO_WORD_BEFORE + r"(?:AKIA|ASIA)[A-Z0-9]{16}" + _NO_WORD_AFTER,
    "github-token": _NO_WORD_BEFORE
    + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "slack-token": _NO_WORD_BEFORE + r"xox[abprse]-[A-Za-z0-9\-]{10,}",
    "google-api-key": _NO_WORD_BEFORE + r"AIza[A-Za-z0-9_\-]{35}" + _NO_WORD_AFTER,
    "jwt": _NO_WORD_BEFORE + r"eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{8,}",
    # Only the token: "Authorization: Bearer [REDACTED:bearer-token]".
    "bearer-token": _NO_WORD_BEFORE
    + r"(?i:bearer)(?:\s|\\[nrt])+(?P<bearer>[A-Za-z0-9\-._~+/]{16,}=*)",
    # Only the password: "postgresql://me:[REDACTED:url-password]@host/db".
    "url-password": (r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@\"'<>]*:(?P<password>[^\s/@\"'<>?#]+)@"),
}
"""Each secret's marker name and regular expression (in the order tried at one position)."""

_INNER = {"bearer-token": "bearer", "url-password": "password"}
"""Patterns whose match keeps its context: only this group is the secret."""


def _group(name: str) -> str:
    return name.replace("-", "_")


_CLUES: dict[str, tuple[str, ...]] = {
    "private-key": ("PRIVATE KEY",),
    "anthropic-key": ("sk-ant-",),
    "openai-key": ("sk-",),
    "stripe-key": ("_live_", "_test_"),
    "aws-access-key": ("AKIA", "ASIA"),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "slack-token": tuple(f"xox{letter}-" for letter in "abprse"),
    "google-api-key": ("AIza",),
    "jwt": ("eyJ",),
    "bearer-token": (),  # "bearer" in any case: `_clued`
    "url-password": ("://",),
}
"""Per pattern, fixed characters that each of its matches holds (one of these)."""

_ANY_CLUE = re.compile(
    r"sk-|_(?:live|test)_|A(?:KIA|SIA|Iza)|g(?:h[pousr]_|ithub_pat_)|xox[abprse]-|eyJ"
    r"|PRIVATE KEY|://|\\[u/]"
)
"""Any of `_CLUES`, or a JSON escape that could hide one (`\\u0073k-`, `:\\/\\/`). A text
without any (nor `bearer` in any case: `_may_hold_secrets`) holds no secret, which this scan
tells in a few microseconds per kilobyte where the patterns take a hundred times that: most turns
hold no secret. The alternation is factored by hand, and the bearer tested apart, because the
regex engine's first-character skip needs an alternation of literals (three times faster)."""


def _may_hold_secrets(text: str) -> bool:
    """Whether `text` (a string, or any JSON text: its escapes are accounted for) may hold a
    secret; False is certain."""
    return _ANY_CLUE.search(text) is not None or "bearer" in text.lower()


@functools.cache
def _secrets_of(names: tuple[str, ...]) -> re.Pattern[str]:
    """One regex of the patterns `names`, tried in `PATTERNS`' order at each position."""
    return re.compile(
        "|".join(f"(?P<{_group(name)}>{PATTERNS[name]})" for name in names), re.DOTALL
    )


def _clued(text: str) -> tuple[str, ...]:
    """The patterns whose clues `text` holds: the others cannot match it anywhere, and one regex
    of those few scans it several times faster than one of all."""
    lowered = None
    names = []
    for name, clues in _CLUES.items():
        if clues:
            found = any(clue in text for clue in clues)
        else:
            lowered = text.lower() if lowered is None else lowered
            found = "bearer" in lowered
        if found:
            names.append(name)
    return tuple(names)


def _marker(match: re.Match[str]) -> str:
    groups = match.re.groupindex
    for name in PATTERNS:
        group = _group(name)
        found = match.group(group) if group in groups else None
        if found is None:
            continue
        marker = f"[REDACTED:{name}]"
        inner = _INNER.get(name)
        if inner is None:
            return marker
        start, end = match.span(inner)
        offset = match.start()
        return found[: start - offset] + marker + found[end - offset :]
    raise AssertionError("a match of no pattern")  # pragma: no cover


def redact_text(text: str) -> str:
    """`text` with every secret `PATTERNS` knows replaced by its marker; every other character
    kept (the same string when there is none)."""
    names = _clued(text) if _may_hold_secrets(text) else ()
    if not names:
        return text
    redacted = _secrets_of(names).sub(_marker, text)
    return text if redacted == text else redacted  # a marker met again is no change


def _is_signature(key: str) -> bool:
    return key in SIGNATURE_KEYS or key.endswith(("signature", "Signature"))


def _redact_value(value: Any) -> Any:
    """A JSON value with every string redacted, its keys and signature fields kept; the same
    object when nothing changed."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        items = [_redact_value(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        return _redact_mapping(value, frozenset())
    return value


def _redact_mapping(value: Mapping[str, Any], kept: Iterable[str]) -> Any:
    keep = frozenset(kept)
    changed = False
    result: dict[str, Any] = {}
    for key, item in value.items():
        new = item if key in keep or _is_signature(key) else _redact_value(item)
        changed = changed or new is not item
        result[key] = new
    return result if changed else value


class SecretRedactor:
    """The redactor `secrets()` makes (see the module): a turn in, the turn with its secrets
    replaced out (the same turn when it holds none)."""

    def __call__(self, turn: Turn) -> Turn:
        if not self.may_change(turn.json_text()):
            return turn  # the usual case: the text a store hashes anyway, scanned once
        wire = turn.to_json()
        blocks = wire.get("blocks", [])
        new_blocks = [
            _redact_mapping(block, _BLOCK_KEYS_KEPT) if isinstance(block, dict) else block
            for block in blocks
        ]
        rest = {key: item for key, item in wire.items() if key != "blocks"}
        new_rest = _redact_mapping(rest, {"role"})
        if new_rest is rest and all(a is b for a, b in zip(new_blocks, blocks, strict=True)):
            return turn
        redacted = {key: (new_blocks if key == "blocks" else new_rest[key]) for key in wire}
        return parse_turn(redacted)

    def may_change(self, json_text: str) -> bool:
        """Whether a turn (or any JSON value) with this JSON text may hold a secret: False is
        certain, and lets a caller skip parsing it."""
        return _may_hold_secrets(json_text)

    def redact_json(self, value: Any) -> Any:
        """Any JSON value with every string redacted, keys and signature fields kept (a pi or
        Claude Code line); the same object when nothing changed."""
        return _redact_value(value)

    def __repr__(self) -> str:
        return "memstore.redact.secrets()"


def secrets() -> SecretRedactor:
    """The ready-made redactor for common secrets (see the module): pass it as a store's
    `redact=`, or call it on a turn."""
    return SecretRedactor()


redact_secrets = secrets


def apply_redactor(redactor: Redactor, turn: Turn) -> Turn:
    """Run a store's redactor on a turn, checking what it returns.

    Raises:
        InvalidArgumentError: the redactor returned no turn, or failed (naming it).
        InvalidTurnError: it returned a wire dict that breaks the contract.
    """
    try:
        result: Any = redactor(turn)
    except Exception as exc:
        raise InvalidArgumentError(f"the store's redactor {redactor!r} failed: {exc!r}") from exc
    if isinstance(result, Turn):
        return result
    if isinstance(result, Mapping):
        try:
            return parse_turn(result)
        except InvalidTurnError as exc:
            raise InvalidTurnError(f"the store's redactor returned an {exc}") from exc
    raise InvalidArgumentError(
        f"the store's redactor {redactor!r} returned a {type(result).__name__}, not a Turn"
    )
