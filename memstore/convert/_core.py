"""What every converter shares: a turn keeps what the contract cannot say in one extra key named
after the format (on the turn and on each block), and an item that does not come back equal from
the typed mapping is kept whole, so every conversion is lossless by construction.

A converted turn looks like `{"role": ..., "blocks": [...], "<format>": {...rest of the item}}`;
each block made from a content part holds the rest of that part under the same key; a part the
converter does not know is a `{"kind": "foreign", "<format>": part}` block; an item it cannot map
at all is `{"role": ..., "blocks": [], "<format>": {"item": item}}`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeAlias

from memstore import jsjson
from memstore.blocks import block_problem, turn_problem
from memstore.errors import InvalidJsonError
from memstore.types import Turn, TurnLike, parse_turn

Item: TypeAlias = dict[str, Any]
"""One framework message or item as JSON (a dict)."""

FOREIGN = "foreign"
"""The block kind of a content part a converter does not map onto a memstore block."""
OPAQUE = "item"
"""The key, inside a turn's format key, of an item kept whole."""


class PartCodec:
    """Maps one type of content part onto one memstore block kind, field by field."""

    def __init__(self, kind: str, *fields: tuple[str, str]) -> None:
        self.kind = kind
        self.fields = fields  # (part key, block key)

    def block(self, part: Item, fmt: str) -> Item | None:
        """The block for `part`, or None if it does not come back equal."""
        mapped = {part_key for part_key, _ in self.fields}
        block: Item = {"kind": self.kind}
        block.update((bk, part[pk]) for pk, bk in self.fields if pk in part)
        block[fmt] = {key: value for key, value in part.items() if key not in mapped}
        if block_problem(block) is not None or self.part(block, fmt) != part:
            return None
        return block

    def part(self, block: Mapping[str, Any], fmt: str) -> Item:
        """The content part a block made by `block` came from."""
        part = dict(block[fmt])
        part.update((pk, block[bk]) for pk, bk in self.fields if bk in block)
        return part


_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def split_data_url(url: object) -> tuple[str, str] | None:
    """The media type and base64 data of a `data:` URL, if it is exactly one."""
    match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if match is None:
        return None
    try:
        base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        return None
    return match.group(1), match.group(2)


def data_url(block: Mapping[str, Any]) -> str:
    """The `data:` URL of an image block."""
    return f"data:{block['mediaType']};base64,{block['dataBase64']}"


def tool_input(arguments: str) -> Item:
    """A tool call block's `input` for a JSON arguments string, with the string itself kept when
    the parsed value would not be written back as the same text."""
    try:
        parsed = jsjson.loads(arguments)
    except InvalidJsonError:
        return {"input": arguments, "arguments": arguments}
    if jsjson.dumps(parsed) == arguments:
        return {"input": parsed}
    return {"input": parsed, "arguments": arguments}


def tool_arguments(block: Mapping[str, Any]) -> str:
    """The JSON arguments string of a tool call block (the inverse of `tool_input`)."""
    arguments = block.get("arguments")
    return arguments if isinstance(arguments, str) else jsjson.dumps(block.get("input"))


def as_text(value: Any) -> str:
    """A tool output as a string: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else jsjson.dumps(value)


class Converter:
    """Turns one framework's items into memstore turns and back.

    Subclasses map what they know (`typed` and its inverse `untyped`) and how a turn written by
    memstore itself reads in their format (`native`); this class makes the whole lossless.
    """

    fmt: ClassVar[str]
    codecs: ClassVar[Mapping[str, PartCodec]] = {}

    def to_turn(self, item: Mapping[str, Any]) -> Turn:
        """The turn of one item; `to_items` of it gives the item back, equal."""
        item = dict(item)
        turn = self.typed(item)
        if turn is None or turn_problem(turn) is not None or self._back(turn) != [item]:
            turn = {"role": self.opaque_role(item), "blocks": [], self.fmt: {OPAQUE: item}}
        return parse_turn(turn)

    def to_turns(self, items: Iterable[Mapping[str, Any]]) -> list[Turn]:
        """The turns of several items, one each."""
        return [self.to_turn(item) for item in items]

    def to_items(self, turn: TurnLike) -> list[Item]:
        """The item a converted turn came from, or what a turn memstore wrote reads as."""
        # a Turn's JSON text is at hand (a stored turn's is the stored text): parsing it is
        # faster than dumping the model
        data = jsjson.loads(turn.json_text()) if isinstance(turn, Turn) else dict(turn)
        return self._back(data)

    def to_items_of(self, turns: Iterable[TurnLike]) -> list[Item]:
        """The items of several turns, in order."""
        return [item for turn in turns for item in self.to_items(turn)]

    def _back(self, turn: Mapping[str, Any]) -> list[Item]:
        rest = turn.get(self.fmt)
        if not isinstance(rest, Mapping):
            return self.native(turn)
        if OPAQUE in rest:
            return [rest[OPAQUE]]
        return [self.untyped(turn, dict(rest))]

    # -- content parts ----------------------------------------------------------------------

    def blocks_of(self, content: Any) -> list[Item] | None:
        """Blocks for a content field: a string is one text block without the format key."""
        if isinstance(content, str):
            return [{"kind": "text", "text": content}]
        if not isinstance(content, list):
            return None
        return [self.block_of(part) for part in content]

    def block_of(self, part: Any) -> Item:
        """The block of one content part; a foreign block for a part it cannot map."""
        codec = self._codec(part)
        block = codec.block(part, self.fmt) if codec is not None else None
        return block if block is not None else {"kind": FOREIGN, self.fmt: part}

    def content_of(self, blocks: Sequence[Mapping[str, Any]]) -> Any:
        """The content field `blocks_of` read (a string, or a list of parts)."""
        if len(blocks) == 1 and self.fmt not in blocks[0] and blocks[0]["kind"] == "text":
            return blocks[0]["text"]
        return [self.part_of(block) for block in blocks]

    def part_of(self, block: Mapping[str, Any]) -> Any:
        """The content part a block came from (its format key holds the rest)."""
        rest = block.get(self.fmt)
        if block["kind"] == FOREIGN:
            return rest
        codec = self._codec(rest)
        return codec.part(block, self.fmt) if codec is not None else None

    def _codec(self, part: Any) -> PartCodec | None:
        kind = part.get("type") if isinstance(part, Mapping) else None
        return self.codecs.get(kind) if isinstance(kind, str) else None

    # -- what each format says ----------------------------------------------------------------

    def typed(self, item: Item) -> Item | None:
        """The turn's JSON for an item this format maps, or None."""
        raise NotImplementedError

    def untyped(self, turn: Mapping[str, Any], rest: Item) -> Item:
        """The item of a turn made by `typed`; `rest` is a copy of the turn's format key."""
        raise NotImplementedError

    def native(self, turn: Mapping[str, Any]) -> list[Item]:
        """The items a turn that memstore wrote reads as in this format."""
        raise NotImplementedError

    def opaque_role(self, item: Item) -> str:
        """The role of a turn that keeps an item whole."""
        return "user" if item.get("role") in ("user", "system", "developer") else "assistant"


class ImageCodec(PartCodec):
    """Maps an image part holding base64 data onto an image block; each format says where the
    data sits (`take`) and how to put it back (`put`)."""

    def __init__(self) -> None:
        super().__init__("image")

    def block(self, part: Item, fmt: str) -> Item | None:
        taken = self.take(part)
        if taken is None:
            return None
        media_type, data, rest = taken
        block: Item = {"kind": "image", "mediaType": media_type, "dataBase64": data, fmt: rest}
        return block if self.part(block, fmt) == part else None

    def part(self, block: Mapping[str, Any], fmt: str) -> Item:
        return self.put(jsjson.loads(jsjson.dumps(block[fmt])), block)

    def take(self, part: Item) -> tuple[str, str, Item] | None:
        """The media type, the base64 data and the rest of an image part, or None."""
        raise NotImplementedError

    def put(self, rest: Item, block: Mapping[str, Any]) -> Item:
        """The image part of `block`, built on a copy of the rest."""
        raise NotImplementedError


class UrlImageCodec(ImageCodec):
    """An image part whose `data:` URL sits at `key`, or at `key`.`inner` when nested."""

    def __init__(self, key: str, inner: str | None = None) -> None:
        super().__init__()
        self.key, self.inner = key, inner

    def take(self, part: Item) -> tuple[str, str, Item] | None:
        holder = part.get(self.key) if self.inner else part
        if not isinstance(holder, dict):
            return None
        key = self.inner or self.key
        split = split_data_url(holder.get(key))
        if split is None:
            return None
        rest = dict(part)
        if self.inner:
            rest[self.key] = {k: v for k, v in holder.items() if k != key}
        else:
            del rest[key]
        return split[0], split[1], rest

    def put(self, rest: Item, block: Mapping[str, Any]) -> Item:
        if self.inner:
            rest[self.key][self.inner] = data_url(block)
        else:
            rest[self.key] = data_url(block)
        return rest
