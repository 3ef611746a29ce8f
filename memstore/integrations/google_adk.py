"""A Google ADK `BaseSessionService` on a memstore store; needs the `google-adk` extra.

```python
runner = Runner(agent=agent, app_name="my_app", session_service=MemstoreSessionService(store))
```

Each ADK session is the memstore session `adk~app~user~session` (each part percent-encoded)
whose metadata names its `app_name`, `user_id` and `session_id` and holds its `state` and
`update_time`; each event is one turn: its text, thoughts, function calls and responses as
blocks (searchable), the whole event under the turn's `adk` key (read back equal). App state is
the metadata of the empty session `adk~app`, user state of `adk~app~user`. `append_event` writes
the event and every state change in one transaction, and refuses a stale session object
(`StaleSessionError`): another writer appended since it was read.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from memstore.errors import MissingExtraError

try:
    from google.adk.errors import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events.event import Event
    from google.adk.sessions._session_util import extract_json_safe_state_delta
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session
    from google.adk.sessions.state import State
except ImportError as exc:
    raise MissingExtraError(__name__, "google-adk", exc) from exc

from memstore.errors import HeadMovedError, SessionExistsError, UnknownSessionError
from memstore.integrations import _history
from memstore.integrations._history import AnyStore, Call, History
from memstore.store.plans import UNSET, SessionInfo, StoredMetadata, Unset
from memstore.types import SessionNode, Turn

__all__ = ["MemstoreSessionService", "event_to_turn", "memstore_session_id", "turn_to_event"]

AGENT = "google-adk"
_MAX_ID = 255


def memstore_session_id(
    app_name: str, user_id: str | None = None, session_id: str | None = None
) -> str:
    """The memstore session of an ADK session (`adk~app~user~session`), or of a user's state
    (`adk~app~user`) or an app's (`adk~app`): each part percent-encoded, the whole hashed when it
    would pass 255 characters."""
    parts = [part for part in (app_name, user_id, session_id) if part is not None]
    name = "~".join(["adk", *(quote(part, safe="").replace("~", "%7E") for part in parts)])
    if len(name) > _MAX_ID:
        joined = "\0".join(parts).encode("utf-8", "surrogatepass")
        name = f"adk~{len(parts)}~{hashlib.sha256(joined).hexdigest()}"
    return name


def event_to_turn(event: Event) -> dict[str, Any]:
    """An event as a turn: its parts as blocks, the whole event (as ADK's JSON) under `adk`."""
    content = event.content
    user = (
        (content.role == "user") if content is not None and content.role else event.author == "user"
    )
    blocks: list[dict[str, Any]] = []
    for part in (content.parts or []) if content is not None else []:
        call, response = part.function_call, part.function_response
        if part.text is not None:
            blocks.append({"kind": "thinking" if part.thought else "text", "text": part.text})
        elif call is not None and call.id and call.name:
            blocks.append(
                {"kind": "tool_call", "id": call.id, "name": call.name, "input": call.args}
            )
        elif response is not None and response.id:
            blocks.append(
                {"kind": "tool_result", "callId": response.id, "output": response.response}
            )
    return {
        "role": "user" if user else "assistant",
        "blocks": blocks,
        "adk": _event_json(event),
    }


def _event_json(event: Event) -> dict[str, Any]:
    """The fields set on the event, as JSON (a None or a value inside `custom_metadata` kept as
    given), with its id and time, which ADK fills in by default."""
    always = event.model_dump(mode="json", include={"id", "timestamp"})
    return {**always, **event.model_dump(mode="json", exclude_unset=True)}


def turn_to_event(turn: Turn, created_at: int) -> Event:
    """The event a turn holds; a turn memstore wrote (no `adk` key) as a text event."""
    data = turn.to_json()
    if isinstance(data.get("adk"), Mapping):
        return Event.model_validate(data["adk"])
    text = "".join(block.get("text", "") for block in data["blocks"] if block.get("kind") == "text")
    return Event.model_validate(
        {
            "id": f"memstore-{created_at}",
            "author": "user" if turn.role == "user" else "model",
            "timestamp": created_at / 1000,
            "content": {
                "role": "user" if turn.role == "user" else "model",
                "parts": [{"text": text}],
            },
        }
    )


@dataclass(frozen=True)
class _Ids:
    app_name: str
    user_id: str
    session_id: str

    @property
    def session(self) -> str:
        return memstore_session_id(self.app_name, self.user_id, self.session_id)

    @property
    def user(self) -> str:
        return memstore_session_id(self.app_name, self.user_id)

    @property
    def app(self) -> str:
        return memstore_session_id(self.app_name)

    def identity(self, scope: str) -> dict[str, Any]:
        """The metadata that names a scope's session (and that listing filters on)."""
        found: dict[str, Any] = {"agent": AGENT, "scope": scope, "app_name": self.app_name}
        if scope != "app":
            found["user_id"] = self.user_id
        if scope == "session":
            found["session_id"] = self.session_id
        return found


class MemstoreSessionService(BaseSessionService):
    """ADK sessions, events and app/user/session state kept in memstore (see the module's
    docstring); takes a `SessionStore` or an `AsyncSessionStore`, SQLite or PostgreSQL."""

    def __init__(self, store: AnyStore) -> None:
        self.store = store

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new session with `state` (its `app:` and `user:` keys go to the app's and the
        user's state, `temp:` keys nowhere), under `session_id` trimmed of surrounding whitespace
        (a generated id when it is blank or None). Raises AlreadyExistsError for a taken id."""
        ids = _Ids(app_name, user_id, _trimmed(session_id) or str(uuid.uuid4()))
        deltas = extract_json_safe_state_delta(state or {})
        now = time.time()
        merges: dict[str, dict[str, Any]] = {
            ids.session: {**ids.identity("session"), "state": deltas["session"], "update_time": now}
        }
        _scope_merges(merges, ids, deltas)
        call = _call("append_merging_metadata", ids.session, [], merges, exists=False)
        try:
            await _history.arun(self.store, _write(call))
        except SessionExistsError as exc:
            raise AlreadyExistsError(f"Session with id {ids.session_id} already exists.") from exc
        found = await _history.arun(self.store, _load(ids, None, events=False))
        if found is None:  # deleted at once by another writer
            raise SessionNotFoundError(f"Session {ids.session_id} not found.")
        return found

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its merged state and its events (all, or as `config` limits them:
        the newest `num_recent_events`, those at or after `after_timestamp`); None if missing."""
        ids = _Ids(app_name, user_id, _trimmed(session_id))
        config = config or GetSessionConfig()
        recent, after = config.num_recent_events, config.after_timestamp
        found = await _history.arun(
            self.store, _load(ids, recent if after is None else None, events=recent != 0)
        )
        if found is not None and after is not None:
            kept = [event for event in found.events if event.timestamp >= after]
            found.events = kept[-recent:] if recent else kept
        return found

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (one user's, or every user's), oldest update first, with their
        merged state and without events."""
        found = await _history.arun(self.store, _listed(app_name, user_id))
        return ListSessionsResponse(sessions=found)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session and its events (the app's and the user's state stay)."""
        ids = _Ids(app_name, user_id, _trimmed(session_id))
        await _history.arun(self.store, _write(_call("delete_session", ids.session)))

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without their `user:` prefix."""
        return await _history.arun(self.store, _state(memstore_session_id(app_name, user_id)))

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store `event` and its state changes in one transaction, then apply them to `session`.

        Raises:
            SessionNotFoundError: the session is not stored.
            StaleSessionError: another writer appended to the session since it was read.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        ids = _Ids(session.app_name, session.user_id, session.id)
        deltas = extract_json_safe_state_delta(event.actions.state_delta or {})
        merges: dict[str, dict[str, Any]] = {
            ids.session: {"state": deltas["session"], "update_time": event.timestamp}
        }
        _scope_merges(merges, ids, deltas)
        marker = session._storage_update_marker
        try:
            nodes = await _history.arun(
                self.store, _append(ids, session, event_to_turn(event), merges, marker)
            )
        except UnknownSessionError as exc:
            raise SessionNotFoundError(f"Session {session.id} not found.") from exc
        session._storage_update_marker = nodes[-1].id
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)


def _trimmed(session_id: str | None) -> str:
    """A session id without surrounding whitespace, as ADK's in-memory and SQLite services take
    it on create, read and delete (a blank one, like none, gets a generated id on create)."""
    return session_id.strip() if session_id else ""


def _call(name: str, *args: Any, **kwargs: Any) -> Call:
    return name, args, kwargs


def _write(call: Call) -> History[Any]:
    return (yield call)


def _scope_merges(
    merges: dict[str, dict[str, Any]], ids: _Ids, deltas: Mapping[str, dict[str, Any]]
) -> None:
    """Add the app's and the user's state changes to `merges`."""
    for scope, target in (("app", ids.app), ("user", ids.user)):
        if deltas[scope]:
            merges[target] = {**ids.identity(scope), "state": deltas[scope]}


def _append(
    ids: _Ids, session: Session, turn: dict[str, Any], merges: Any, marker: str | None
) -> History[list[SessionNode]]:
    expected: str | Unset | None = UNSET if marker is None else marker or None
    if marker is None:  # a session object this service did not read: compare update times
        found: dict[str, StoredMetadata] = yield _call("session_metadata", [ids.session])
        if ids.session not in found:
            raise UnknownSessionError(f"no session {ids.session!r}")
        info = found[ids.session]
        stored = float(info.metadata.get("update_time", 0.0))
        last = session.events[-1].id if session.events else None
        head_event = yield from _head_event_id(ids.session)
        if stored > session.last_update_time and head_event != last:
            raise StaleSessionError(_STALE)
        expected = info.head
    try:
        nodes: list[SessionNode] = yield _call(
            "append_merging_metadata",
            ids.session,
            [turn],
            merges,
            expected_head=expected,
            exists=True,
        )
    except HeadMovedError as exc:
        raise StaleSessionError(_STALE) from exc
    return nodes


_STALE = (  # "modified in storage", as ADK's own services say it (callers may match on it)
    "The session has been modified in storage since this session object was read (another "
    "writer appended to it); reload it with get_session and retry."
)


def _head_event_id(session_id: str) -> History[str | None]:
    nodes: list[SessionNode] = yield _call("load_path_nodes", session_id, last=1)
    if not nodes:
        return None
    return turn_to_event(nodes[-1].turn, nodes[-1].created_at).id


def _state(session_id: str) -> History[dict[str, Any]]:
    """The `state` object of a scope's session; {} when it has none."""
    found: dict[str, StoredMetadata] = yield _call("session_metadata", [session_id])
    return _state_of(found.get(session_id))


def _state_of(stored: StoredMetadata | None) -> dict[str, Any]:
    state = None if stored is None else stored.metadata.get("state")
    return dict(state) if isinstance(state, Mapping) else {}


def _load(ids: _Ids, last: int | None, *, events: bool) -> History[Session | None]:
    found: dict[str, StoredMetadata] = yield _call(
        "session_metadata", [ids.session, ids.app, ids.user]
    )
    if ids.session not in found:
        return None
    nodes: list[SessionNode] = []
    if events:
        nodes = yield _call("load_path_nodes", ids.session, last=last)
        if last is not None:
            nodes = nodes[-last:]
    session = _session(
        found[ids.session], _state_of(found.get(ids.app)), _state_of(found.get(ids.user))
    )
    loaded = [turn_to_event(node.turn, node.created_at) for node in nodes]
    session.events = sorted(loaded, key=_event_time)  # stable: a tie keeps append order
    if nodes:
        session._storage_update_marker = nodes[-1].id
    return session


def _event_time(event: Event) -> float:
    """An event's timestamp: ADK's stores return a session's events ordered by it."""
    return event.timestamp


def _listed(app_name: str, user_id: str | None) -> History[list[Session]]:
    wanted: dict[str, Any] = {"agent": AGENT, "scope": "session", "app_name": app_name}
    if user_id is not None:
        wanted["user_id"] = user_id
    infos: list[SessionInfo] = yield _call("sessions", metadata=wanted)
    app_state = yield from _state(memstore_session_id(app_name))
    user_states: dict[str, dict[str, Any]] = {}
    if user_id is not None:
        user_states[user_id] = yield from _state(memstore_session_id(app_name, user_id))
    else:
        users: list[SessionInfo] = yield _call(
            "sessions", metadata={"agent": AGENT, "scope": "user", "app_name": app_name}
        )
        user_states = {info.metadata["user_id"]: dict(info.metadata["state"]) for info in users}
    found = [
        _session(info, app_state, user_states.get(info.metadata["user_id"], {})) for info in infos
    ]
    found.sort(key=lambda session: (session.last_update_time, session.user_id, session.id))
    return found


def _session(
    info: SessionInfo | StoredMetadata, app_state: Mapping[str, Any], user_state: Mapping[str, Any]
) -> Session:
    """An ADK session (without events) from its memstore session's metadata."""
    meta = info.metadata
    state = dict(meta.get("state") or {})
    state.update(_prefixed(State.APP_PREFIX, app_state))
    state.update(_prefixed(State.USER_PREFIX, user_state))
    found = Session(
        id=meta["session_id"],
        app_name=meta["app_name"],
        user_id=meta["user_id"],
        state=state,
        last_update_time=float(meta.get("update_time", info.updated_at / 1000)),
    )
    found._storage_update_marker = info.head or ""
    return found


def _prefixed(prefix: str, state: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    return ((prefix + key, value) for key, value in state.items())
