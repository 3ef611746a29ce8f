"""The block kinds. Each kind is one class: its fields and their types (the pydantic model), and
what every part of memstore needs to know about it, read from a block's wire dict.

- `check`: what is wrong with a raw block (the JSONL importer and the adapters), by the same
  rule as validation: required fields present with their type, optional ones absent, `null` or
  of their type (`null` means the same as absent, and is kept as written);
- `indexed`: its search text and its `node_blocks` columns (the stores' rows);
- `chars`: its size for condensation's token estimate (JavaScript string lengths);
- `transcript`: one line of the plain-text transcript a model reads (condensation, invokers),
  and `replayed`: whether a model is sent it back at all;
- `preview`: a few words for lists of turns;
- `view`: how the terminal, Markdown and HTML renderers show it (`BlockView`).

A new kind is one more subclass of `BlockBase` here and its line in `Block`; everything above
then handles it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, NamedTuple, TypeAlias

from pydantic import Discriminator, Field, StrictBool, StrictStr, Tag

from memstore import jsjson
from memstore._wire import _Wire

__all__ = [
    "BLOCK_CLASSES",
    "MAX_JSON_DEPTH",
    "Block",
    "BlockBase",
    "BlockColumns",
    "BlockView",
    "ImageBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "UnknownBlock",
    "WireField",
    "block_class",
    "block_problem",
    "nesting_problem",
    "per_kind",
    "turn_problem",
    "utf16_length",
]

Raw: TypeAlias = Mapping[str, Any]
"""A block's wire dict (`{"kind": "tool_result", "callId": ...}`), already checked."""


def utf16_length(text: str) -> int:
    """JavaScript's `text.length`: astral characters count two, lone surrogates one."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _json_length(value: Any) -> int:
    return utf16_length(jsjson.dumps(value))


@dataclass(frozen=True)
class WireField:
    """One field of a kind as a raw block holds it: its JSON key and the values it accepts."""

    key: str
    required: bool
    types: tuple[type, ...]  # accepted Python types of its JSON value; `object` for any
    nullable: bool  # `null` accepted (every optional field: it reads as absent)
    type_name: str  # for messages: "a string", "a boolean"

    def problem(self, block: Raw) -> str | None:
        """What is wrong with this field of `block`, or None."""
        if self.key not in block:
            mixed = next((f', not "{k}"' for k in _MIXED_UP.get(self.key, ()) if k in block), "")
            return f'needs {self.type_name} "{self.key}"{mixed}' if self.required else None
        value = block[self.key]
        if value is None and self.nullable:
            return None
        if isinstance(value, self.types):
            return None
        return f'has a "{self.key}" that is not {self.type_name}'


_TYPE_NAMES = {str: "a string", bool: "a boolean", object: "any JSON value"}
_MIXED_UP = {"id": ("callId", "call_id"), "callId": ("call_id", "id"), "mediaType": ("media_type",)}


def _wire_field(key: str, annotation: Any, required: bool) -> WireField:
    """The `WireField` of a model field, read from its annotation (str, bool, Any, or None
    with one of them)."""
    accepted = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    nullable = not required or type(None) in accepted
    base = [typing.get_args(t)[0] if typing.get_origin(t) is Annotated else t for t in accepted]
    base = [object if t is Any else t for t in base if t is not type(None)]
    if len(base) != 1 or base[0] not in _TYPE_NAMES:
        raise TypeError(f"block field {key!r}: memstore cannot check a {annotation!r} yet")
    return WireField(key, required, (base[0],), nullable, _TYPE_NAMES[base[0]])


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


class BlockColumns(NamedTuple):
    """A block's columns in `node_blocks` besides its place and kind (None: not this kind's).

    A named tuple: made for every block of every imported turn, in a fraction of a dataclass's
    time."""

    text: str | None = None
    tool_name: str | None = None
    call_id: str | None = None
    is_error: int | None = None
    input_json: str | None = None
    output_json: str | None = None


_NO_COLUMNS = BlockColumns()


@dataclass(frozen=True)
class BlockView:
    """How to show a block, in terms every renderer has; each medium decides the look.

    `form`: "prose" (text as written), "aside" (text read apart: thinking), "record" (a labelled
    value: a tool call or result, an unknown block), "picture" (an image) or "note" (one line
    standing for the block).
    """

    form: Literal["prose", "aside", "record", "picture", "note"]
    label: str = ""  # what the block is: "thinking", "tool call", "tool error", ...
    text: str = ""  # prose, aside or note: the text
    name: str | None = None  # record: the name shown with it (a tool's)
    call_id: str | None = None  # record: the tool call it makes, or answers
    answers_call: bool = False  # record: `call_id` is the call it answers (name it by that)
    value: Any = None  # record: the value shown (as JSON, or as text when `verbatim`)
    verbatim: bool = False  # record: `value` is a string shown as written
    failed: bool | None = None  # record: True failed, False succeeded, None not a result
    media_type: str = ""  # picture
    data_base64: str = ""  # picture


class BlockBase(_Wire):
    """One block kind: subclasses declare its fields and override what differs from these."""

    replayed: ClassVar[bool] = True
    """Whether a model is sent this block back as part of a conversation."""

    @classmethod
    def _always_present(cls) -> tuple[str, ...]:
        return ("kind",)

    @classmethod
    def wire_fields(cls) -> tuple[WireField, ...]:
        """The fields a raw block of this kind has besides `kind`, as `check` reads them."""
        found: tuple[WireField, ...] | None = cls.__dict__.get("_wire_fields")
        if found is None:
            found = tuple(
                _wire_field(field.alias or name, field.annotation, field.is_required())
                for name, field in cls.model_fields.items()
                if name != "kind"
            )
            cls._wire_fields = found  # type: ignore[attr-defined]
        return found

    @classmethod
    def check(cls, block: Raw) -> str | None:
        """What is wrong with a raw block of this kind, or None when validation accepts it."""
        for field in cls.wire_fields():
            problem = field.problem(block)
            if problem is not None:
                return problem
        return None

    @classmethod
    def indexed(cls, block: Raw) -> tuple[str, BlockColumns]:
        """Its searchable text ("" for none) and its `node_blocks` columns, in one pass."""
        return "", _NO_COLUMNS

    @classmethod
    def chars(cls, block: Raw) -> int:
        """Its characters for the token estimate (JavaScript string lengths)."""
        return 0

    @classmethod
    def transcript(cls, block: Raw) -> str:
        """Its line in a plain-text transcript for a model."""
        return f"[{block.get('kind')} block]"

    @classmethod
    def preview(cls, block: Raw) -> str:
        """A few words that stand for it in a list of turns."""
        return f"[{block.get('kind')}]"

    @classmethod
    def view(cls, block: Raw) -> BlockView:
        """How renderers show it."""
        kind = block.get("kind")
        return BlockView("record", label="unknown block", name=repr(kind), value=dict(block))


def _text(block: Raw) -> str:
    text = block.get("text")
    return text if isinstance(text, str) else ""


def _value_json(block: Raw, key: str) -> str | None:
    """`JSON.stringify` of an optional value, None when the block has no such key."""
    return jsjson.dumps(block[key]) if key in block else None


def _value_text(value: Any, dumped: str | None) -> str:
    """A tool input's or output's searchable text: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return dumped if dumped is not None else "null"


class _TextLike(BlockBase):
    """A kind whose content is one `text` (each subclass declares its fields, `kind` first)."""

    @classmethod
    def indexed(cls, block: Raw) -> tuple[str, BlockColumns]:
        text = _text(block)
        return text, BlockColumns(text=text)

    @classmethod
    def chars(cls, block: Raw) -> int:
        return utf16_length(_text(block))

    @classmethod
    def transcript(cls, block: Raw) -> str:
        return _text(block)

    @classmethod
    def preview(cls, block: Raw) -> str:
        return _text(block)

    @classmethod
    def view(cls, block: Raw) -> BlockView:
        return BlockView("prose", text=_text(block))


class TextBlock(_TextLike):
    """Visible text."""

    kind: Literal["text"] = "text"
    text: StrictStr


class ThinkingBlock(_TextLike):
    """The model's reasoning text (never sent back: the APIs want the provider's signature)."""

    kind: Literal["thinking"] = "thinking"
    text: StrictStr
    replayed: ClassVar[bool] = False

    @classmethod
    def transcript(cls, block: Raw) -> str:
        return f"(thinking) {_text(block)}"

    @classmethod
    def view(cls, block: Raw) -> BlockView:
        return BlockView("aside", label="thinking", text=_text(block))


class ToolCallBlock(BlockBase):
    """A request from the model to run a tool; `input` is any JSON value."""

    kind: Literal["tool_call"] = "tool_call"
    id: StrictStr
    name: StrictStr
    input: Any = None

    @classmethod
    def indexed(cls, block: Raw) -> tuple[str, BlockColumns]:
        name, dumped = block.get("name"), _value_json(block, "input")
        columns = BlockColumns(tool_name=name, call_id=block.get("id"), input_json=dumped)
        return f"{name} {_value_text(block.get('input'), dumped)}", columns

    @classmethod
    def chars(cls, block: Raw) -> int:
        serialized = _json_length(block["input"]) if "input" in block else 0
        return utf16_length(block.get("name", "")) + serialized

    @classmethod
    def transcript(cls, block: Raw) -> str:
        arguments = jsjson.dumps(block.get("input"))
        return f"-> tool call {block.get('name')} [{block.get('id')}]: {arguments}"

    @classmethod
    def preview(cls, block: Raw) -> str:
        return f"{block.get('name')}()"

    @classmethod
    def view(cls, block: Raw) -> BlockView:
        return BlockView(
            "record",
            label="tool call",
            name=block.get("name"),
            call_id=block.get("id"),
            value=block.get("input"),
        )


class ToolResultBlock(BlockBase):
    """The result of a tool call, matched to it by `call_id` (`callId` on the wire).

    `is_error` absent or `null` both mean "not said to have failed"; `null` is kept as written.
    """

    kind: Literal["tool_result"] = "tool_result"
    call_id: StrictStr
    output: Any = None
    is_error: StrictBool | None = None

    @classmethod
    def indexed(cls, block: Raw) -> tuple[str, BlockColumns]:
        dumped = _value_json(block, "output")
        failed = int(block.get("isError") is True)
        columns = BlockColumns(call_id=block.get("callId"), is_error=failed, output_json=dumped)
        return _value_text(block.get("output"), dumped), columns

    @classmethod
    def chars(cls, block: Raw) -> int:
        return _json_length(block["output"]) if "output" in block else 0

    @classmethod
    def transcript(cls, block: Raw) -> str:
        status = "error" if block.get("isError") is True else "result"
        return f"<- tool {status} [{block.get('callId')}]: {jsjson.dumps(block.get('output'))}"

    @classmethod
    def preview(cls, block: Raw) -> str:
        return "tool error" if block.get("isError") is True else "tool result"

    @classmethod
    def view(cls, block: Raw) -> BlockView:
        failed = block.get("isError") is True
        output = block.get("output")
        return BlockView(
            "record",
            label="tool error" if failed else "tool result",
            call_id=block.get("callId"),
            answers_call=True,
            value=output,
            verbatim=isinstance(output, str),
            failed=block.get("isError"),
        )


class ImageBlock(BlockBase):
    """An inline image, base64-encoded."""

    kind: Literal["image"] = "image"
    media_type: StrictStr
    data_base64: StrictStr = Field(alias="dataBase64")

    @classmethod
    def chars(cls, block: Raw) -> int:
        return utf16_length(block.get("dataBase64", ""))

    @classmethod
    def transcript(cls, block: Raw) -> str:
        size = len(block.get("dataBase64", ""))
        return f"[image {block.get('mediaType')}, {size} base64 chars]"

    @classmethod
    def preview(cls, block: Raw) -> str:
        return f"[{block.get('mediaType')} image]"

    @classmethod
    def view(cls, block: Raw) -> BlockView:
        return BlockView("picture", media_type=block["mediaType"], data_base64=block["dataBase64"])


class UnknownBlock(BlockBase):
    """A block of a kind memstore does not know; kept as-is, never dropped."""

    kind: StrictStr


def _block_tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, Mapping) else getattr(value, "kind", None)
    return kind if type(kind) is str and kind in _KNOWN_KINDS else "unknown"


Block: TypeAlias = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ThinkingBlock, Tag("thinking")]
    | Annotated[ToolCallBlock, Tag("tool_call")]
    | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[ImageBlock, Tag("image")]
    | Annotated[UnknownBlock, Tag("unknown")],
    Discriminator(_block_tag),
]
"""Any block: the model of its kind, an UnknownBlock for a kind memstore does not know. A new
kind is one class above and one line here."""


def _known_classes() -> dict[str, type[BlockBase]]:
    """Each known kind's class, read from `Block`'s tags."""
    union, _ = typing.get_args(Block)
    classes = {}
    for member in typing.get_args(union):
        cls, tag = typing.get_args(member)
        if tag.tag != "unknown":
            classes[tag.tag] = cls
    return classes


BLOCK_CLASSES: dict[str, type[BlockBase]] = _known_classes()
"""The class of each known block kind (any other kind is an UnknownBlock), as in `Block`."""
_KNOWN_KINDS = frozenset(BLOCK_CLASSES)


def block_class(kind: object) -> type[BlockBase]:
    """The class of a block kind; UnknownBlock for any kind memstore does not know."""
    return BLOCK_CLASSES.get(kind, UnknownBlock) if type(kind) is str else UnknownBlock


def per_kind(hook: str) -> Callable[[object], Callable[[Raw], Any]]:
    """One of the kinds' methods looked up by kind, for hot paths: `per_kind("chars")(kind)`
    is `block_class(kind).chars`, without looking the method up on the class every time."""
    known: dict[str, Callable[[Raw], Any]] = {
        kind: getattr(cls, hook) for kind, cls in BLOCK_CLASSES.items()
    }
    unknown: Callable[[Raw], Any] = getattr(UnknownBlock, hook)

    def lookup(kind: object) -> Callable[[Raw], Any]:
        return known.get(kind, unknown) if type(kind) is str else unknown

    return lookup


def block_problem(block: Any) -> str | None:
    """What is wrong with a raw block, or None if validation would accept it."""
    if not isinstance(block, dict) or not isinstance(block.get("kind"), str):
        return "must be an object with a string kind"
    problem = block_class(block["kind"]).check(block)
    return None if problem is None else f"({block['kind']}) {problem}"


def turn_problem(turn: Any) -> str | None:
    """What is wrong with a raw turn, or None if `Turn` would accept it: the same rule as
    validation (each kind's fields in `memstore.blocks`), checked without building models."""
    if not isinstance(turn, dict):
        return "turn must be an object"
    if turn.get("role") not in ("user", "assistant"):
        return f'turn.role must be "user" or "assistant", got {turn.get("role")!r}'
    blocks = turn.get("blocks")
    if not isinstance(blocks, list):
        return "turn.blocks must be an array"
    for index, block in enumerate(blocks):
        problem = block_problem(block)
        if problem is not None:
            return f"turn.blocks[{index}] {problem}"
    return nesting_problem(turn)


MAX_JSON_DEPTH = 1000
"""Levels of arrays and objects a turn's JSON may nest, the turn itself being the first: SQLite's
JSON functions (its search index, deletes, `memstore sql`) cannot read deeper text (SQLite 3.45
and later stop at 1,000 levels), so both backends refuse such a turn when it enters."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _children(value: Any) -> Iterable[Any] | None:
    """The values inside a JSON container (a dict, list, tuple or wire model); None for a
    scalar."""
    kind = type(value)
    if kind in _SCALARS:
        return None
    if kind is dict or kind is list or isinstance(value, tuple):
        return value.values() if kind is dict else value  # type: ignore[no-any-return]
    if isinstance(value, Mapping):
        return value.values()
    if isinstance(value, _Wire):
        return [*value.__dict__.values(), *(value.__pydantic_extra__ or {}).values()]
    return None


def _steps(value: Any) -> list[tuple[str, Any]]:
    """The children of a JSON container with their path steps (`.key`, `[index]`)."""
    if isinstance(value, _Wire):
        names = type(value)._wire_names()
        extra = value.__pydantic_extra__ or {}
        value = {**{names.get(key, key): item for key, item in value.__dict__.items()}, **extra}
    if isinstance(value, Mapping):
        return [(f".{key}", child) for key, child in value.items()]
    return [(f"[{index}]", child) for index, child in enumerate(value)]


def _deeper_than(value: Any, levels: int) -> bool:
    """Whether `value` nests more than `levels` arrays and objects (found without recursion,
    so that any depth is measured; every turn stored passes here, so plain dicts and lists
    take the short way)."""
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        kind = type(item)
        children = item.values() if kind is dict else item if kind is list else _children(item)
        if children is None:
            continue
        if depth > levels:
            return True
        for child in children:
            if type(child) not in _SCALARS:
                push((child, depth + 1))
    return False


def nesting_problem(turn: Any) -> str | None:
    """What is wrong with a turn that nests more than MAX_JSON_DEPTH levels, naming the field
    that goes too deep (`turn.blocks[0].input`, `turn.meta`); None for any other turn."""
    if not _deeper_than(turn, MAX_JSON_DEPTH):
        return None
    where, value, depth = "turn", turn, 1
    while where.count(".") < 2 and not (depth == 2 and where != "turn.blocks"):
        step, value = next(
            (step, child)
            for step, child in _steps(value)
            if _deeper_than(child, MAX_JSON_DEPTH - depth)
        )
        where, depth = where + step, depth + 1
    return (
        f"{where} nests arrays and objects more than {MAX_JSON_DEPTH} levels deep (counting the "
        "turn itself): memstore refuses such turns on every backend, since SQLite cannot read them"
    )
