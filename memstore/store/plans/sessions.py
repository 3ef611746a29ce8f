"""Sessions as a whole: their summaries (`SessionInfo`), listing and filtering them, their
title, tags and metadata, creating the row an append locks, and deleting one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Float,
    FunctionElement,
    String,
    Text,
    bindparam,
    delete,
    distinct,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from memstore.errors import InvalidArgumentError, SessionExistsError, UnknownSessionError
from memstore.store.owners import refuse_if_importing
from memstore.store.plans.contract import UNSET, Plan, Unset, now_ms
from memstore.store.plans.nodes import lookup_id
from memstore.store.plans.paging import Window, a_tag
from memstore.store.plans.retention import epoch_ms
from memstore.store.plans.usage_rollup import session_usage_sums
from memstore.store.policy import BACKENDS, Backend
from memstore.store.prepared import Prepared
from memstore.store.tables import (
    NOT_IMPORTING,
    TENANT,
    nodes,
    of_tenant,
    session_tags,
    sessions,
)
from memstore.types import is_storable_text, validate_session_id
from memstore.usage import cost_total

__all__ = [
    "NATIVE_AGENT",
    "SessionInfo",
    "SessionPage",
    "agent_of",
    "delete_session",
    "ensure_session",
    "list_session_ids",
    "list_sessions",
    "refuse_taken_id",
    "session_info",
    "update_session",
]

NATIVE_AGENT = "memstore"
"""The agent of a session written through memstore itself (as the `session_sources` view says)."""


def agent_of(metadata: Mapping[str, Any] | None) -> str:
    """Which agent wrote a session, from its metadata: `pi` or `claude-code` for an imported
    session file, else memstore itself."""
    agent = (metadata or {}).get("agent")
    return agent if isinstance(agent, str) else NATIVE_AGENT


@dataclass(frozen=True)
class SessionInfo:
    """A session's summary: its head, size, times (epoch ms) and user metadata."""

    id: str
    head: str | None
    node_count: int
    created_at: int
    updated_at: int
    branch_count: int = 0
    title: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    expires_at: int | None = None
    """Its own expiry time (epoch ms; None: its tags' or the store's default, if any)."""
    input_tokens: int = 0
    """The session's usage totals over `node_usage` and the usage prunes deleted from it
    (`pruned_usage`; 0 where no node says)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def agent(self) -> str:
        """Which agent wrote the session (`memstore`, `pi` or `claude-code`)."""
        return agent_of(self.metadata)


@dataclass(frozen=True)
class SessionPage:
    """One page of `session_page`: its sessions, and the cursor of the next page (None after
    the last)."""

    sessions: list[SessionInfo]
    next_cursor: str | None


_TOTALS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
)


def _ensure_session_statement(backend: Backend) -> Prepared:
    """An upsert that creates the session row if missing and returns its head, locking the row
    against other writers until the transaction ends (a no-op update is what takes the lock on
    PostgreSQL). Compiled once and run on the driver's cursor: the append path's first
    statement (see `prepared`)."""
    return Prepared(
        backend.insert(sessions)
        .values(
            tenant=TENANT,
            id=bindparam("session_id"),
            head=None,
            created_at=bindparam("now"),
            updated_at=bindparam("now"),
        )
        .on_conflict_do_update(
            index_elements=[sessions.c.tenant, sessions.c.id], set_={"head": sessions.c.head}
        )
        .returning(sessions.c.head, sessions.c.importing)
    )


_ENSURE_SESSION = {backend: _ensure_session_statement(backend) for backend in BACKENDS}


def ensure_session(backend: Backend, session_id: str, now: int) -> Plan[str | None]:
    """Create the session row if missing, lock it against other writers, return its head.

    Raises:
        SessionImportingError: an import of the session is still running.
    """
    ((head, importing),) = yield _ENSURE_SESSION[backend], {"session_id": session_id, "now": now}
    refuse_if_importing(session_id, importing)
    return cast(str | None, head)


def refuse_taken_id(session_id: str) -> Plan[None]:
    """Raise SessionExistsError if a session `session_id` exists (SessionImportingError if it
    is being imported): a new session's id must be free."""
    query = select(sessions.c.importing).where(of_tenant(sessions), sessions.c.id == session_id)
    taken = (yield query).first()
    if taken is not None:
        refuse_if_importing(session_id, taken.importing)
        raise SessionExistsError(f"session {session_id!r} already exists; choose another id")


def list_session_ids() -> Plan[list[str]]:
    """Every session id, sorted."""
    return list(
        (yield select(sessions.c.id).where(NOT_IMPORTING).order_by(sessions.c.id)).scalars()
    )


class _TopLevelValue(FunctionElement[Any]):
    """The value of one top-level key of a JSON object (NULL when absent), as `->>` gives it,
    the key bound as a parameter on both backends. On SQLite it is read with `json_each`: a
    JSON path (`$."key"`) cannot quote a `"`, so a key spliced into one could name a nested
    value (`team"."sub`) or miss its own (`we"ird`)."""

    name = "top_level_value"
    inherit_cache = True


@compiles(_TopLevelValue)
def _top_level_value(element: _TopLevelValue, compiler: SQLCompiler, **kw: Any) -> str:
    column, key = (compiler.process(clause, **kw) for clause in element.clauses)
    return f"({column} ->> {key})"


@compiles(_TopLevelValue, "sqlite")
def _sqlite_top_level_value(element: _TopLevelValue, compiler: SQLCompiler, **kw: Any) -> str:
    column, key = (compiler.process(clause, **kw) for clause in element.clauses)
    return f"(SELECT value FROM json_each({column}) WHERE key = {key})"


_FLOAT_INTEGERS = 2**1023  # beyond this a JSON number is no float the database compares


def _metadata_filter(key: str, value: Any) -> ColumnElement[bool]:
    """Sessions whose metadata holds `value` at the top-level key `key`, whatever the key's
    characters."""
    if not isinstance(key, str):
        raise InvalidArgumentError(f"metadata filter keys are strings, not {key!r}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _FLOAT_INTEGERS:
        raise InvalidArgumentError(f"metadata filter {key!r}: the number is too large to compare")
    if isinstance(value, bool):
        kind: Any = Boolean
    elif isinstance(value, int | float):
        kind = Float
    elif isinstance(value, str):
        kind = String
    else:
        raise InvalidArgumentError(
            f"metadata filter {key!r}: only str, number and bool values can be matched, "
            f"not {type(value).__name__}"
        )
    found = _TopLevelValue(sessions.c.meta, literal(key, Text()))
    matches: ColumnElement[bool] = sql_cast(found, kind) == value
    return matches


def _tip_count(node_count: Any) -> Any:
    """Per session: nodes that no node names as parent, i.e. the tips of its branches.

    Counted as the session's nodes less the distinct parents they name (a parent is always a
    node of the same session), so that each count reads the session's rows once, through its
    indexes. An anti-join of `nodes` with itself is quadratic when PostgreSQL plans it as a
    nested loop, as it does on tables it never analyzed: 20,000 nodes took 150 s."""
    parents = select(func.count(distinct(nodes.c.parent_id))).where(
        of_tenant(nodes), nodes.c.session_id == sessions.c.id, nodes.c.parent_id.is_not(None)
    )
    return node_count - parents.scalar_subquery()


# Built once: a statement made of the same subquery objects each time has its cache key
# memoized (building them anew cost SQLAlchemy several milliseconds per listing).
_NODES = (
    select(func.count())
    .where(of_tenant(nodes), nodes.c.session_id == sessions.c.id)
    .scalar_subquery()
)
_NODE_COUNT = _NODES.label("node_count")
_BRANCH_COUNT = _tip_count(_NODES).label("branch_count")
_USAGE_SUMS = session_usage_sums(_TOTALS)  # with what prunes rolled up (usage_rollup)


def list_sessions(
    *,
    tag: str | None = None,
    title_contains: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    limit: int | None = None,
    session_id: str | None = None,
    window: Window | None = None,
) -> Plan[list[SessionInfo]]:
    """Sessions, most recently updated first (or as `window` orders them, from its cursor,
    within its times), filtered by tag, title and metadata values.

    Raises:
        InvalidArgumentError: `limit` is no whole number >= 0, or `metadata` is no mapping of
            string keys to str, number or bool values.
    """
    if limit is not None and (type(limit) is not int or limit < 0):
        raise InvalidArgumentError(f"a session list limit is a whole number >= 0, not {limit!r}")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidArgumentError(f"a metadata filter is a mapping, not {metadata!r}")
    query = select(sessions, _NODE_COUNT, _BRANCH_COUNT, *_USAGE_SUMS)
    query = (window or Window()).apply(query.where(NOT_IMPORTING))
    if session_id is not None:
        query = query.where(sessions.c.id == lookup_id(session_id))
    if tag is not None:
        # A lookup per session in the key (session_id, tag): a page of the newest sessions
        # with a common tag reads about a page of rows, not every session with the tag.
        tagged = select(session_tags.c.tag).where(
            of_tenant(session_tags),
            session_tags.c.session_id == sessions.c.id,
            session_tags.c.tag == tag,
        )
        query = query.where(tagged.exists())
    if title_contains is not None:
        query = query.where(sessions.c.title.contains(title_contains, autoescape=True))
    for key, value in (metadata or {}).items():
        query = query.where(_metadata_filter(key, value))
    if limit is not None:
        query = query.limit(limit)
    rows = list((yield query))
    tags: dict[str, list[str]] = {}
    if rows:
        tag_rows = (
            yield select(session_tags)
            .where(of_tenant(session_tags), session_tags.c.session_id.in_([row.id for row in rows]))
            .order_by(session_tags.c.tag)
        )
        for tag_row in tag_rows:
            tags.setdefault(tag_row.session_id, []).append(tag_row.tag)
    return [
        SessionInfo(
            id=row.id,
            head=row.head,
            node_count=row.node_count,
            branch_count=row.branch_count,
            created_at=row.created_at,
            updated_at=row.updated_at,
            title=row.title,
            tags=tuple(tags.get(row.id, ())),
            metadata=row.meta or {},
            expires_at=row.expires_at,
            **_totals(row),
        )
        for row in rows
    ]


def _totals(row: Any) -> dict[str, Any]:
    """SessionInfo's usage fields from a row's sums (NULL: no usage rows)."""
    return {
        name: (cost_total(value) if name == "cost_usd" else int(value or 0))
        for name in _TOTALS
        if (value := getattr(row, name)) is not None
    }


def session_page(
    *,
    tag: str | None = None,
    title_contains: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    limit: int = 100,
    window: Window | None = None,
) -> Plan[SessionPage]:
    """One page of `list_sessions` and the cursor after it.

    Raises:
        InvalidArgumentError: `limit` is no whole number >= 1 (and as `list_sessions`).
    """
    if type(limit) is not int or limit < 1:
        raise InvalidArgumentError(f"a page holds a whole number >= 1 of sessions, not {limit!r}")
    found = yield from list_sessions(
        tag=tag, title_contains=title_contains, metadata=metadata, limit=limit + 1, window=window
    )
    if len(found) <= limit:
        return SessionPage(found, None)
    last = found[limit - 1]
    cursor = (window or Window()).next_cursor(last.updated_at, last.id)
    return SessionPage(found[:limit], cursor)


def session_info(session_id: str) -> Plan[SessionInfo]:
    """One session's summary. Raises UnknownSessionError when it does not exist."""
    found = yield from list_sessions(session_id=session_id)
    if not found:
        raise UnknownSessionError(f"no session {session_id!r}")
    return found[0]


def delete_session(session_id: str) -> Plan[bool]:
    """Delete a session with all its nodes and records; False when there was none."""
    # Unlink parents first: cascading through the parent foreign key would recurse once per
    # level of the DAG, which SQLite refuses beyond 1,000 levels.
    key = lookup_id(session_id)
    query = select(sessions.c.importing).where(of_tenant(sessions), sessions.c.id == key)
    refuse_if_importing(session_id, (yield query).scalar_one_or_none())
    yield update(nodes).where(of_tenant(nodes), nodes.c.session_id == key).values(parent_id=None)
    result = yield delete(sessions).where(of_tenant(sessions), sessions.c.id == key)
    return bool(result.rowcount)


def metadata_object(backend: Backend, field: str, value: object) -> dict[str, Any]:
    """`value` as a session's metadata object (a dict), refused unless a mapping with string keys
    that `backend` can store; `field` names it in the error (e.g. "metadata of session 'a'")."""
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise InvalidArgumentError(f"{field}: a mapping with string keys, not {value!r}")
    refuse_unstorable(backend, {field: value})
    return dict(value)


def refuse_unstorable(backend: Backend, fields: Mapping[str, object]) -> None:
    """Refuse the first string among `fields` (or keys, values and items inside them, at any
    depth) that `backend` cannot store, naming where it is: a lone surrogate (not text, on
    every backend) or a NUL character (where the backend's text cannot hold one)."""
    pending: list[tuple[str, object]] = list(fields.items())
    while pending:
        name, value = pending.pop()
        if isinstance(value, str):
            _refuse_unstorable_text(backend, name, value)
        elif isinstance(value, Mapping):
            pending.extend((f"{name} key {key!r}", key) for key in value if isinstance(key, str))
            pending.extend((f"{name}[{key!r}]", item) for key, item in value.items())
        elif isinstance(value, list | tuple):
            pending.extend((f"{name}[{index}]", item) for index, item in enumerate(value))


def _refuse_unstorable_text(backend: Backend, where: str, text: str) -> None:
    """Refuse `text` (found at `where`) if `backend` cannot store it."""
    if "\x00" in text and not backend.text_holds_nul:
        raise InvalidArgumentError(
            f"{where} holds a NUL character, which {backend.label} cannot store: remove it"
        )
    if not is_storable_text(text.replace("\x00", "")):
        raise InvalidArgumentError(
            f"{where} holds a lone surrogate, which is not text (no database stores it): remove it"
        )


def update_session(
    backend: Backend,
    session_id: str,
    *,
    title: str | Unset | None = UNSET,
    tags: Sequence[str] | Unset = UNSET,
    metadata: Mapping[str, Any] | Unset | None = UNSET,
    expiry: int | datetime | Unset | None = UNSET,
) -> Plan[None]:
    """Set a session's title, tags, metadata or expiry (creating an empty session if needed).

    Raises:
        InvalidArgumentError: a value the backend cannot store (PostgreSQL: a NUL character);
            metadata that is not a mapping with string keys; an expiry that is no epoch
            ms >= 0 or aware datetime.
    """
    validate_session_id(session_id)
    values: dict[str, Any] = {}
    if not isinstance(metadata, Unset):
        values["meta"] = (
            None if metadata is None else metadata_object(backend, "metadata", metadata)
        )
    refuse_unstorable(backend, {"title": title, "tags": tags})
    yield from ensure_session(backend, session_id, now_ms())
    if not isinstance(title, Unset):
        values["title"] = title
    if not isinstance(expiry, Unset):
        values["expires_at"] = epoch_ms(expiry)
    if values:
        yield (
            update(sessions)
            .where(of_tenant(sessions), sessions.c.id == session_id)
            .values(**values)
        )
    if not isinstance(tags, Unset):
        if isinstance(tags, str):
            raise InvalidArgumentError("tags must be a sequence of strings, not one string")
        yield delete(session_tags).where(
            of_tenant(session_tags), session_tags.c.session_id == session_id
        )
        unique = sorted({a_tag(tag, "tags") for tag in tags})
        if unique:
            yield insert(session_tags).values(
                [{"tenant": TENANT, "session_id": session_id, "tag": tag} for tag in unique]
            )
