"""What both renderers share: times, JSON for reading, one-line previews, image sizes."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from memstore import jsjson
from memstore.errors import InvalidJsonError
from memstore.types import Block, SessionNode, TextBlock

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SURROGATE = re.compile("[\ud800-\udfff]")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


def iso_time(created_at: int) -> str:
    """Epoch milliseconds as a UTC ISO 8601 time (`2026-01-01T00:00:00.000Z`)."""
    try:
        moment = _EPOCH + timedelta(milliseconds=created_at)
    except OverflowError:
        return f"{created_at} ms after the epoch"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def scrub(text: str) -> str:
    """`text` with lone surrogates replaced, so the output can always be written as UTF-8."""
    try:
        text.encode("utf-8")  # the common case, and a quarter of the search's time
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def pretty_json(value: Any) -> str:
    """A JSON value indented for reading; nested deeper than the indenting encoders go, compact
    JSON (written without recursion); anything JSON cannot carry falls back to its repr."""
    try:
        return orjson.dumps(value, option=_JSON_OPTIONS).decode()
    except TypeError:
        pass  # big integers, lone surrogates, odd objects: the standard encoder copes with more
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=repr)
    except RecursionError:
        return compact_json(value)
    except (TypeError, ValueError):
        return _repr(value)


def compact_json(value: Any) -> str:
    """A JSON value on one line, at any depth: memstore's own encoder, which does not recurse."""
    try:
        return jsjson.dumps(value)
    except InvalidJsonError:
        return _repr(value)


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except RecursionError:
        return f"(a {type(value).__name__} nested too deep to show)"


def one_line(text: str, limit: int = 100) -> str:
    """`text` with its whitespace collapsed, cut to at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def value_preview(value: Any, limit: int = 100) -> str:
    """A one-line preview of a JSON value: a string as itself, anything else as compact JSON."""
    if isinstance(value, str):
        return one_line(value, limit)
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        text = compact_json(value)  # nested deeper than orjson goes, or not plain JSON
    return one_line(text, limit)


def image_bytes(data_base64: str) -> int | None:
    """The decoded size of padded base64 data, or None when it is not valid base64."""
    if len(data_base64) % 4 or not _BASE64.fullmatch(data_base64):
        return None
    return len(data_base64) // 4 * 3 - data_base64[-2:].count("=")


def describe_size(size: int | None, data_base64: str) -> str:
    """`1,234 bytes`, or what is wrong with the data."""
    if size is None:
        return f"invalid base64, {len(data_base64):,} characters"
    return f"{size:,} bytes"


def block_preview(block: Block) -> str:
    """A few words that stand for one block in a list of turns."""
    return type(block).preview(block.model_dump())


def turn_preview(node: SessionNode, limit: int = 80) -> str:
    """A one-line preview of a turn: its text first, else what its other blocks are."""
    blocks = node.turn.blocks
    texts = [block.text for block in blocks if isinstance(block, TextBlock) and block.text.strip()]
    parts = texts or [block_preview(block) for block in blocks]
    return one_line(" ".join(parts), limit) or "(empty turn)"
