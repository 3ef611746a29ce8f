"""The contract types: turns and blocks, session nodes, the model seam and run events.

Everything here is an immutable pydantic model whose JSON names stay camelCase (`createdAt`,
`callId`, `dataBase64`) while Python names are snake_case. Turns and blocks keep keys they do not
know, and every wire model remembers the key order it was parsed with, because a node's id is a hash
of the exact JSON text of its turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Literal,
    Protocol,
    Self,
    TypeAlias,
    runtime_checkable,
)

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    WrapSerializer,
    model_validator,
)

from memstore import jsjson
from memstore._trusted import (
    NO_EXTRA,
    Layout,
    all_fields,
    build,
    build_plain,
    layout_of,
    new_model,
    private_state,
    set_extra,
    set_fields_set,
    set_private,
    set_values,
    split_values,
)
from memstore._wire import JsonDict, _Contract, _Wire
from memstore.blocks import (
    BLOCK_CLASSES,
    Block,
    BlockBase,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UnknownBlock,
    nesting_problem,
    turn_problem,
)
from memstore.errors import InvalidSessionIdError, InvalidTurnError

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

Role: TypeAlias = Literal["user", "assistant"]
Clock: TypeAlias = Callable[[], int]
"""Returns the current time in epoch milliseconds; injectable for tests."""


_BlockLayout: TypeAlias = tuple[type[BlockBase], Layout]
_ROLES = ("user", "assistant")


def _block_layout(kind: object, keys: tuple[str, ...]) -> _BlockLayout | None:
    """The class of a stored block of `kind` with `keys`, and how to build it without
    validating again; None when it lacks its kind or a required key (the caller validates)."""
    if type(kind) is not str:
        return None
    cls = BLOCK_CLASSES.get(kind, UnknownBlock)
    layout = layout_of(cls, keys)
    return None if layout is None else (cls, layout)


class _UntrustedTurnError(Exception):
    """A stored turn that lacks a required key: it is validated, to say what is wrong."""


def _as_list(value: tuple[Any, ...], handler: SerializerFunctionWrapHandler) -> list[Any]:
    return list(handler(value))


class Turn(_Wire):
    """One message of a conversation: a role and its blocks."""

    role: Role
    blocks: Annotated[tuple[Block, ...], WrapSerializer(_as_list)]

    @model_validator(mode="after")
    def _within_json_depth(self) -> Self:
        """Refuse a turn deeper than MAX_JSON_DEPTH, however it is built (the JSON importers
        check the same rule through `turn_problem`)."""
        problem = nesting_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def has_tool_result(self) -> bool:
        """Whether the turn answers a tool call (holds a tool_result block): a history is never
        cut just before such a turn, which would part the result from its call."""
        return Turn.kinds_have_tool_result(block.kind for block in self.blocks)

    @staticmethod
    def kinds_have_tool_result(kinds: Iterable[object]) -> bool:
        """`has_tool_result` of a turn in wire form, given its blocks' kinds."""
        return any(kind == "tool_result" for kind in kinds)

    def to_json(self) -> JsonDict:
        """The wire form: a plain dict in the original key order, unknown keys included."""
        return self.model_dump()

    def _wire_text(self) -> str:
        return self.json_text()

    def json_text(self) -> str:
        """`JSON.stringify` of the wire form: the text a node id hashes and a store keeps.

        Computed once per turn (turns are immutable; do not mutate values passed into one).
        """
        private = private_state(self)
        text: str | None = private.get("json_text")
        if text is None:
            text = private["json_text"] = jsjson.dumps(self.to_json())
        return text

    @classmethod
    def from_json_text(cls, text: str) -> Turn:
        """Parse and validate a turn from its JSON text, which it keeps as its `json_text`."""
        turn = cls.model_validate(jsjson.loads(text))
        private_state(turn)["json_text"] = text
        return turn

    @classmethod
    def _from_stored_text(cls, text: str) -> Turn:
        """A turn from JSON text that memstore stored (see `_from_stored_texts`)."""
        return cls._from_stored_texts((text,))[0]

    @classmethod
    def _from_stored_texts(cls, texts: Sequence[str]) -> list[Turn]:
        """Turns from JSON texts that memstore stored: trusted, built slot by slot (like
        `model_construct`, at a fraction of the cost), unless one lacks a required key (then
        validation says what is wrong). One loop builds a session's worth, inline: a call per
        model cost a tenth of a long load. Each turn keeps its text as its `json_text`: a dict
        per turn, where computing the texts again (an equality, a fork) costs twice the load."""
        turns: list[Turn] = []
        layouts: dict[tuple[str, ...], Layout | None] = {}
        block_layouts: dict[tuple[Any, tuple[str, ...]], _BlockLayout | None] = {}
        for text, data in zip(texts, jsjson.loads_each(texts), strict=True):
            try:
                keys = tuple(data) if type(data) is dict else ()
                layout = layouts.get(keys) or layouts.setdefault(keys, layout_of(cls, keys))
                if layout is None or data["role"] not in _ROLES or type(data["blocks"]) is not list:
                    raise _UntrustedTurnError
                blocks = []
                for block in data["blocks"]:
                    kind_keys = (block["kind"], tuple(block))  # KeyError, TypeError: untrusted
                    found = block_layouts.get(kind_keys) or block_layouts.setdefault(
                        kind_keys, _block_layout(*kind_keys)
                    )
                    if found is None:
                        raise _UntrustedTurnError
                    block_cls, block_layout = found
                    model = new_model(block_cls)
                    if block_layout.same:
                        set_values(model, block)
                        set_extra(model, NO_EXTRA)
                    else:
                        set_values(model, (split := split_values(block, block_layout))[0])
                        set_extra(model, split[1])
                    set_fields_set(model, block_layout.fields_set)
                    set_private(model, block_layout.private)
                    blocks.append(model)
            except (_UntrustedTurnError, KeyError, TypeError):
                turns.append(cls.from_json_text(text))
                continue
            data["blocks"] = tuple(blocks)
            turns.append(build(cls, data, layout, {**layout.private, "json_text": text}))
        return turns

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with `update`, one whose JSON text is computed again."""
        copy = super().model_copy(update=update, deep=deep)
        if update:
            private_state(copy).pop("json_text", None)
        return copy


TurnLike: TypeAlias = Turn | Mapping[str, Any]
"""A Turn model or its plain JSON dict; every function that reads turns accepts both."""

_TURN = TypeAdapter(Turn)


def parse_turn(value: TurnLike) -> Turn:
    """Validate a plain JSON dict (or pass a Turn through) into a Turn model.

    Raises:
        InvalidTurnError: the dict breaks the contract; the message names the field.
    """
    if isinstance(value, Turn):
        return value
    try:
        return _TURN.validate_python(value)
    except ValidationError as exc:
        raise InvalidTurnError(_turn_error(value, exc)) from exc


def _turn_error(value: Any, error: ValidationError) -> str:
    """What is wrong with a turn, said as the JSON importer says it (fields by JSON name)."""
    if isinstance(value, Mapping) and isinstance(value.get("blocks"), tuple):
        value = {**value, "blocks": list(value["blocks"])}  # validation takes a tuple, JSON a list
    problem = turn_problem(dict(value) if isinstance(value, Mapping) else value)
    if problem is not None:
        return f"invalid turn: {problem}"
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"invalid turn: {where}: {first['msg']}"


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
        values = {"id": node_id, "parent": parent, "turn": turn, "created_at": created_at}
        return build_plain(cls, values, _ALL_NODE_FIELDS)

    def to_json(self) -> JsonDict:
        """The wire form, keys in the contract's order: id, parent, turn, createdAt."""
        return {
            "id": self.id,
            "parent": self.parent,
            "turn": self.turn.to_json(),
            "createdAt": self.created_at,
        }


_ALL_NODE_FIELDS = all_fields(SessionNode)


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
MIN_CREATED_AT, MAX_CREATED_AT = -(2**63), 2**63 - 1
"""The node times (epoch ms) both databases hold: a signed 64-bit integer."""
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
