"""The contract types: turns and blocks, session nodes, the model seam and run events.

Everything here is an immutable pydantic model whose JSON names stay camelCase (`createdAt`,
`callId`, `dataBase64`) while Python names are snake_case. Turns and blocks keep keys they do not
know, and every wire model remembers the key order it was parsed with, because a node's id is a hash
of the exact JSON text of its turn.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    Literal,
    Protocol,
    Self,
    TypeAlias,
    TypeVar,
    runtime_checkable,
)

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    TypeAdapter,
    WrapSerializer,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from memstore import jsjson
from memstore.errors import InvalidSessionIdError

__all__ = [
    "AgentConfig",
    "Block",
    "Channel",
    "Clock",
    "CompactionPolicy",
    "Conversation",
    "FaultedEvent",
    "ImageBlock",
    "JsonDict",
    "Migrator",
    "ModelCard",
    "ModelInvoker",
    "PendingTool",
    "Role",
    "RunError",
    "RunEvent",
    "RunPhase",
    "RunSnapshot",
    "SessionHead",
    "SessionNode",
    "SettledEvent",
    "SnapshotEvent",
    "StreamDone",
    "StreamError",
    "StreamEvent",
    "StreamOptions",
    "StreamTextDelta",
    "StreamThinkingDelta",
    "TextBlock",
    "TextDeltaEvent",
    "ThinkingBlock",
    "ThinkingDeltaEvent",
    "ToolCallBlock",
    "ToolFinishedEvent",
    "ToolOutcome",
    "ToolResultBlock",
    "ToolStartedEvent",
    "Turn",
    "TurnLike",
    "UnknownBlock",
    "Usage",
    "parse_turn",
    "turn_to_json",
    "validate_session_id",
]

JsonDict: TypeAlias = dict[str, Any]
Role: TypeAlias = Literal["user", "assistant"]
Clock: TypeAlias = Callable[[], int]
"""Returns the current time in epoch milliseconds; injectable for tests."""


class _Contract(BaseModel):
    """Immutable, camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


_setattr = object.__setattr__  # sets a frozen model's slots, as pydantic itself does
_new_object = object.__new__


def _slot_setter(name: str) -> Callable[[object, Any], None]:
    """The setter of one of BaseModel's own slots: the quickest way to fill a new model."""
    setter: Callable[[object, Any], None] = BaseModel.__dict__[name].__set__
    return setter


_set_fields_set = _slot_setter("__pydantic_fields_set__")
_set_extra = _slot_setter("__pydantic_extra__")
_set_private = _slot_setter("__pydantic_private__")


def _private(model: BaseModel) -> dict[str, Any]:
    """A model's private state, set directly in pydantic's per-instance dict.

    Declaring a PrivateAttr would cost an initialization hook on every object, which doubled the
    time to parse a turn.
    """
    private = model.__pydantic_private__
    if private is None:
        private = {}
        _setattr(model, "__pydantic_private__", private)
    return private


_W = TypeVar("_W", bound="_Wire")


class _Wire(_Contract):
    """A wire object that keeps unknown keys and the key order it was parsed with."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="wrap")
    @classmethod
    def _remember_key_order(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        model = handler(data)
        if (type(data) is dict or isinstance(data, Mapping)) and isinstance(model, _Wire):
            implied = tuple(key for key in cls._always_present() if key not in data)
            _private(model)["key_order"] = (*implied, *data) if implied else tuple(data)
        return model

    def __init__(self, /, **data: Any) -> None:
        super().__init__(**data)
        _private(self).pop("key_order", None)  # built in Python: declaration order

    # Validation from a dict must not run this __init__ as well: pydantic calls a model's own
    # __init__ from inside validation unless it is marked as a base one.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def _key_order(self) -> tuple[str, ...] | None:
        private = self.__pydantic_private__
        return private.get("key_order") if private else None

    def _wire_text(self) -> str:
        return jsjson.dumps(self.model_dump())

    def __eq__(self, other: object) -> bool:
        """Equal when of the same type with the same JSON text (so key order counts)."""
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Wire)
        return self._wire_text() == other._wire_text()

    def __hash__(self) -> int:
        return hash(self._wire_text())

    @model_serializer(mode="wrap")
    def _serialize_in_key_order(self, handler: SerializerFunctionWrapHandler) -> JsonDict:
        dumped: JsonDict = handler(self)
        order = self._key_order()
        if order is not None:
            # Parsed from a dict: exactly its keys, unless some were given by Python name.
            ordered = {key: dumped[key] for key in order if key in dumped}
            if len(ordered) == len(order):
                return ordered
        return self._present_in_order(dumped, order or tuple(dumped))

    def _present_in_order(self, dumped: JsonDict, order: tuple[str, ...]) -> JsonDict:
        """The keys that were set (or are always emitted), in `order`, then any others."""
        wire_names = self._wire_names()
        present = {wire_names.get(name, name) for name in self.model_fields_set}
        present.update(self.__pydantic_extra__ or ())
        present.update(self._always_present())
        ordered = {key: dumped[key] for key in order if key in present and key in dumped}
        for key, value in dumped.items():
            if key in present and key not in ordered:
                ordered[key] = value
        return ordered

    @classmethod
    @functools.cache
    def _wire_names(cls) -> dict[str, str]:
        """Python field name -> JSON key."""
        return {name: field.alias or name for name, field in cls.model_fields.items()}

    @classmethod
    def _always_present(cls) -> tuple[str, ...]:
        """Keys emitted even when they were not set explicitly (defaults such as `kind`)."""
        return ()

    @classmethod
    def _layout(cls, keys: tuple[str, ...]) -> _Layout | None:
        """How `_build` makes this class from data with `keys` (None: a required key is
        missing), worked out once per class and key tuple. Hot paths look in `_LAYOUTS` first."""
        found = _LAYOUTS.get((cls, keys))
        if found is None:
            found = cls._work_out_layout(keys)
            if found is not None and len(_LAYOUTS) < _MAX_LAYOUTS:
                _LAYOUTS[cls, keys] = found
        return found

    @classmethod
    def _work_out_layout(cls, keys: tuple[str, ...]) -> _Layout | None:
        """Map each key to its field (or to the extras), and find what is missing."""
        by_key = {name: name for name in cls.model_fields}
        by_key.update({key: name for name, key in cls._wire_names().items()})
        names = tuple(by_key.get(key) for key in keys)
        given = {name for name in names if name is not None}
        fields = cls.model_fields.items()
        if any(field.is_required() and name not in given for name, field in fields):
            return None
        implied = tuple(key for key in cls._always_present() if key not in keys)
        return _Layout(
            same=names == keys and len(given) == len(cls.model_fields),
            names=names,
            defaults={name: field.default for name, field in fields if name not in given},
            fields_set=given | {key for key, name in zip(keys, names, strict=True) if name is None},
            private={"key_order": (*implied, *keys)},
        )


@dataclass(frozen=True)
class _Layout:
    same: bool  # the keys are exactly the fields' names: the data can be the model's dict
    names: tuple[str | None, ...]  # per key of the data: its field, or None for an extra key
    defaults: dict[str, Any]
    fields_set: set[str]
    private: dict[str, Any]


def _build(cls: type[_W], data: JsonDict, layout: _Layout, private: JsonDict) -> _W:
    """The model of `data`, whose keys `layout` describes, set up slot by slot.

    Objects of one layout share its fields-set, and its private state unless `private` is
    their own; neither is ever mutated in place.
    """
    model = _new_object(cls)
    if layout.same:
        _setattr(model, "__dict__", data)
        _set_extra(model, {})
    else:
        values = layout.defaults.copy()
        extra = {}
        for (key, value), name in zip(data.items(), layout.names):  # noqa: B905 (same keys)
            if name is None:
                extra[key] = value
            else:
                values[name] = value
        _setattr(model, "__dict__", values)
        _set_extra(model, extra)
    _set_fields_set(model, layout.fields_set)
    _set_private(model, private)
    return model


_LAYOUTS: dict[tuple[type[_Wire], tuple[str, ...]], _Layout] = {}
# Distinct (class, key tuple) pairs remembered; rarer shapes are worked out anew each time.
_MAX_LAYOUTS = 4096


class _BlockBase(_Wire):
    @classmethod
    def _always_present(cls) -> tuple[str, ...]:
        return ("kind",)


class TextBlock(_BlockBase):
    """Visible text."""

    kind: Literal["text"] = "text"
    text: StrictStr


class ThinkingBlock(_BlockBase):
    """The model's reasoning text."""

    kind: Literal["thinking"] = "thinking"
    text: StrictStr


class ToolCallBlock(_BlockBase):
    """A request from the model to run a tool; `input` is any JSON value."""

    kind: Literal["tool_call"] = "tool_call"
    id: StrictStr
    name: StrictStr
    input: Any = None


class ToolResultBlock(_BlockBase):
    """The result of a tool call, matched to it by `call_id` (`callId` on the wire)."""

    kind: Literal["tool_result"] = "tool_result"
    call_id: StrictStr
    output: Any = None
    is_error: StrictBool | None = None


class ImageBlock(_BlockBase):
    """An inline image, base64-encoded."""

    kind: Literal["image"] = "image"
    media_type: StrictStr
    data_base64: StrictStr = Field(alias="dataBase64")


class UnknownBlock(_BlockBase):
    """A block of a kind memstore does not know; kept as-is, never dropped."""

    kind: StrictStr


_BLOCK_CLASSES: dict[str, type[_BlockBase]] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "tool_call": ToolCallBlock,
    "tool_result": ToolResultBlock,
    "image": ImageBlock,
}
"""The model of each known block kind (any other kind is an UnknownBlock), as in `Block`."""
_KNOWN_KINDS = frozenset(_BLOCK_CLASSES)


def _block_tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, Mapping) else getattr(value, "kind", None)
    return kind if kind in _KNOWN_KINDS else "unknown"


Block: TypeAlias = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ThinkingBlock, Tag("thinking")]
    | Annotated[ToolCallBlock, Tag("tool_call")]
    | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[ImageBlock, Tag("image")]
    | Annotated[UnknownBlock, Tag("unknown")],
    Discriminator(_block_tag),
]


def _trusted_block(block: Any) -> _BlockBase | None:
    """A block of a turn that memstore validated when it stored it, built without validating
    again (like `model_construct`, at a fraction of the cost). It takes `block` over: the
    caller parsed it for this and keeps no other reference.

    Returns None when the block lacks its kind or a required key, for the caller to validate
    and report.
    """
    kind = block.get("kind") if type(block) is dict else None
    if type(kind) is not str:
        return None
    cls = _BLOCK_CLASSES.get(kind, UnknownBlock)
    keys = tuple(block)
    layout = _LAYOUTS.get((cls, keys)) or cls._layout(keys)
    return None if layout is None else _build(cls, block, layout, layout.private)


def _as_list(value: tuple[Any, ...], handler: SerializerFunctionWrapHandler) -> list[Any]:
    return list(handler(value))


class Turn(_Wire):
    """One message of a conversation: a role and its blocks."""

    role: Role
    blocks: Annotated[tuple[Block, ...], WrapSerializer(_as_list)]

    def to_json(self) -> JsonDict:
        """The wire form: a plain dict in the original key order, unknown keys included."""
        return self.model_dump()

    def _wire_text(self) -> str:
        return self.json_text()

    def json_text(self) -> str:
        """`JSON.stringify` of the wire form: the text a node id hashes and a store keeps.

        Computed once per turn (turns are immutable; do not mutate values passed into one).
        """
        private = _private(self)
        text: str | None = private.get("json_text")
        if text is None:
            text = private["json_text"] = jsjson.dumps(self.to_json())
        return text

    @classmethod
    def from_json_text(cls, text: str) -> Turn:
        """Parse and validate a turn from its JSON text, which it keeps as its `json_text`."""
        turn = cls.model_validate(jsjson.loads(text))
        _private(turn)["json_text"] = text
        return turn

    @classmethod
    def _from_stored_text(cls, text: str) -> Turn:
        """A turn from JSON text that memstore stored: trusted, unless it lacks a required key
        (then validation says what is wrong)."""
        data = jsjson.loads(text)
        keys = tuple(data) if type(data) is dict else ()
        layout = _LAYOUTS.get((cls, keys)) or cls._layout(keys)
        blocks = data.get("blocks") if layout is not None else None
        if layout is None or data["role"] not in ("user", "assistant") or type(blocks) is not list:
            return cls.from_json_text(text)
        for index, block in enumerate(blocks):
            model = _trusted_block(block)
            if model is None:
                return cls.from_json_text(text)
            blocks[index] = model
        data["blocks"] = tuple(blocks)
        return _build(cls, data, layout, {**layout.private, "json_text": text})

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with `update`, one whose JSON text is computed again."""
        copy = super().model_copy(update=update, deep=deep)
        if update:
            _private(copy).pop("json_text", None)
        return copy


TurnLike: TypeAlias = Turn | Mapping[str, Any]
"""A Turn model or its plain JSON dict; every function that reads turns accepts both."""

_TURN = TypeAdapter(Turn)


def parse_turn(value: TurnLike) -> Turn:
    """Validate a plain JSON dict (or pass a Turn through) into a Turn model."""
    return value if isinstance(value, Turn) else _TURN.validate_python(value)


def turn_to_json(turn: TurnLike) -> Mapping[str, Any]:
    """The wire dict of a turn; a plain dict is returned as given, in its own key order."""
    return turn.to_json() if isinstance(turn, Turn) else turn


class SessionNode(_Contract):
    """One content-addressed turn in a session DAG."""

    id: StrictStr
    parent: StrictStr | None
    turn: Turn
    created_at: StrictInt

    @classmethod
    def _stored(cls, node_id: str, parent: str | None, turn: Turn, created_at: int) -> SessionNode:
        """A node from a store's own columns, which were validated when written."""
        node = _new_object(cls)
        values = {"id": node_id, "parent": parent, "turn": turn, "created_at": created_at}
        _setattr(node, "__dict__", values)
        _set_fields_set(node, _ALL_NODE_FIELDS)  # never mutated
        _set_extra(node, None)
        _set_private(node, None)
        return node

    def to_json(self) -> JsonDict:
        """The wire form, keys in the contract's order: id, parent, turn, createdAt."""
        return {
            "id": self.id,
            "parent": self.parent,
            "turn": self.turn.to_json(),
            "createdAt": self.created_at,
        }


_ALL_NODE_FIELDS = set(SessionNode.model_fields)


class SessionHead(_Contract):
    """The live leaf of a session."""

    session_id: str
    leaf: str


@runtime_checkable
class Migrator(Protocol):
    """Moves one raw stored record forward by one schema version."""

    @property
    def id(self) -> str: ...

    def upgrade(self, raw: Any) -> Any: ...


# --- the model seam (gateway types) -------------------------------------------------------------


class Usage(_Contract):
    """Tokens a model call consumed."""

    input_tokens: int = 0
    output_tokens: int = 0


class ModelCard(_Contract):
    """What memstore needs to know about a model: its id and window."""

    id: str
    context_window: int
    max_output_tokens: int | None = None


class Conversation(_Contract):
    """The input of a model call."""

    system: str | None = None
    turns: tuple[Turn, ...] = ()


class StreamOptions(_Contract):
    """Per-call options of a model invocation."""

    model: str | None = None
    max_output_tokens: int | None = None


class StreamTextDelta(_Contract):
    """A piece of streamed visible text."""

    kind: Literal["text_delta"] = "text_delta"
    delta: str


class StreamThinkingDelta(_Contract):
    """A piece of streamed reasoning."""

    kind: Literal["thinking_delta"] = "thinking_delta"
    delta: str


class StreamDone(_Contract):
    """The terminal event of a successful stream: the whole turn and its usage."""

    kind: Literal["done"] = "done"
    turn: Turn
    usage: Usage = Usage()


class StreamError(_Contract):
    """The terminal event of a failed stream."""

    kind: Literal["error"] = "error"
    message: str


StreamEvent: TypeAlias = Annotated[
    StreamTextDelta | StreamThinkingDelta | StreamDone | StreamError, Field(discriminator="kind")
]
Channel: TypeAlias = AsyncIterable[StreamEvent] | Iterable[StreamEvent]
"""A model's reply: an async iterator of stream events (a plain iterator is accepted too)."""
ModelInvoker: TypeAlias = Callable[[Conversation, StreamOptions], Channel]
"""The injectable seam through which condensation reaches a model."""


# --- run state and events -----------------------------------------------------------------------

RunPhase: TypeAlias = Literal[
    "idle", "invoking", "streaming", "dispatching", "compacting", "settled", "faulted"
]


class PendingTool(_Contract):
    """A tool call of the current run and how far it has got."""

    id: str
    name: str
    stage: Literal["queued", "running", "done"]


class RunError(_Contract):
    """Why a run faulted. The seed leaves its shape open; extra keys are kept."""

    model_config = ConfigDict(extra="allow")
    message: str
    code: str | None = None


class ToolOutcome(_Contract):
    """What a finished tool produced. The seed leaves its shape open; extra keys are kept."""

    model_config = ConfigDict(extra="allow")
    output: Any = None
    is_error: bool = False


class RunSnapshot(_Contract):
    """The full state of a run at one moment."""

    run_id: str
    session_id: str
    phase: RunPhase
    messages: tuple[Turn, ...] = ()
    pending: tuple[PendingTool, ...] = ()
    usage_total: Usage = Usage()
    model: str
    error: RunError | None = None


class SnapshotEvent(_Contract):
    """A new snapshot of the run."""

    kind: Literal["snapshot"] = "snapshot"
    snapshot: RunSnapshot


class TextDeltaEvent(_Contract):
    """A piece of streamed visible text."""

    kind: Literal["text_delta"] = "text_delta"
    delta: str


class ThinkingDeltaEvent(_Contract):
    """A piece of streamed reasoning."""

    kind: Literal["thinking_delta"] = "thinking_delta"
    delta: str


class ToolStartedEvent(_Contract):
    """A tool began to run."""

    kind: Literal["tool_started"] = "tool_started"
    id: str
    name: str


class ToolFinishedEvent(_Contract):
    """A tool finished."""

    kind: Literal["tool_finished"] = "tool_finished"
    id: str
    name: str
    outcome: ToolOutcome


class SettledEvent(_Contract):
    """The run ended normally."""

    kind: Literal["settled"] = "settled"
    snapshot: RunSnapshot


class FaultedEvent(_Contract):
    """The run ended with an error."""

    kind: Literal["faulted"] = "faulted"
    error: RunError
    snapshot: RunSnapshot


RunEvent: TypeAlias = Annotated[
    SnapshotEvent
    | TextDeltaEvent
    | ThinkingDeltaEvent
    | ToolStartedEvent
    | ToolFinishedEvent
    | SettledEvent
    | FaultedEvent,
    Field(discriminator="kind"),
]


# --- configuration ------------------------------------------------------------------------------


class CompactionPolicy(_Contract):
    """When to condense (a fraction of the window) and how many trailing turns to keep verbatim."""

    trigger_ratio: float = Field(default=0.8, gt=0, le=1)
    keep_recent: int = Field(default=8, ge=0)


class AgentConfig(_Contract):
    """An agent's configuration; `compaction=None` disables condensation."""

    model: str
    system: str | None = None
    tools: Any = None
    max_output_tokens: int | None = Field(default=None, gt=0)
    thinking: str | None = None
    compaction: CompactionPolicy | None = None
    max_turns: int = Field(default=64, gt=0)


_MAX_SESSION_ID = 255
_CONTROL = {chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))}  # C0, DEL and C1
_FORBIDDEN_IN_ID = frozenset("/\\") | _CONTROL


def validate_session_id(session_id: object) -> str:
    """Return `session_id` if it is safe both as a database key and as a file name.

    Raises:
        InvalidSessionIdError: empty, longer than 255 characters, `.` or `..`, or holding a
            path separator, a control character (C0, DEL or C1) or a lone surrogate (which no
            database or file name can store).
    """
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionIdError(f"session id must be a non-empty string, got {session_id!r}")
    if len(session_id) > _MAX_SESSION_ID:
        raise InvalidSessionIdError(f"session id is longer than {_MAX_SESSION_ID} characters")
    if session_id in (".", "..") or not _FORBIDDEN_IN_ID.isdisjoint(session_id):
        raise InvalidSessionIdError(
            f"session id {session_id!r} may not be '.' or '..' or contain '/', '\\' or control "
            "characters"
        )
    if not is_storable_text(session_id):
        raise InvalidSessionIdError(
            f"session id {session_id!r} holds a lone surrogate, which is not text"
        )
    return session_id


def is_storable_text(text: str) -> bool:
    """Whether every database can store `text`: valid Unicode (it encodes as UTF-8) without NUL."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
