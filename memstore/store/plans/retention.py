"""Retention: when a session expires, and pruning what a set of filters selects.

A session expires at its own `expires_at` if it has one; else its last update plus the longest
default of its tags that has one; else its last update plus the store's default; else never.
`prune` selects whole sessions (older than a duration, with a tag, expired: all the filters
given) and, asked to, the nodes of every other session that its head does not reach (the head's
ancestors are kept, so no kept node loses one). It reports what it selected and how many bytes
of stored turns and lines that is, and deletes exactly that when told to, in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)

from memstore.errors import InvalidArgumentError, UnknownSessionError
from memstore.store.node_lines import node_lines_of
from memstore.store.plans.contract import Plan, Unset
from memstore.store.plans.summary_subjects import record_summary_subjects
from memstore.store.plans.usage_rollup import UsageRollup, roll_up
from memstore.store.policy import Backend
from memstore.store.tables import (
    NOT_IMPORTING,
    TENANT,
    expiry_defaults,
    nodes,
    of_tenant,
    records,
    session_tags,
    sessions,
)
from memstore.types import validate_session_id

__all__ = [
    "Expiry",
    "ExpiryDefaults",
    "PruneFilters",
    "PruneReport",
    "PrunedBranches",
    "PrunedSession",
    "duration_ms",
    "epoch_ms",
    "expiry_defaults_of",
    "prune",
    "set_expiry",
    "set_expiry_default",
]

Expiry: TypeAlias = int | datetime | None
"""When a session expires: epoch ms or an aware datetime (None: at its tags' or the store's
default, if any; see `ExpiryDefaults`), which `prune(expired=True)` honours."""

CHUNK = 500
"""Ids per statement: far below SQLite's limit on bound parameters."""


@dataclass(frozen=True)
class ExpiryDefaults:
    """How long after its last update (ms) a session without an `expires_at` expires: the
    store's default (None: never) and each tag's (a session with several: the longest)."""

    store: int | None = None
    tags: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PruneFilters:
    """What a prune selects: whole sessions matching every session filter given (`older_than`
    ms since the last update, `tag`, `expired`), and with `unreachable` the nodes of every
    other session that no head reaches."""

    older_than: int | None = None
    tag: str | None = None
    expired: bool = False
    unreachable: bool = False

    @property
    def selects_sessions(self) -> bool:
        """Whether a session filter was given (else no session is deleted whole)."""
        return self.older_than is not None or self.tag is not None or self.expired


@dataclass(frozen=True)
class PrunedSession:
    """A session a prune deletes whole: its node count and the bytes of its stored turns and
    kept lines."""

    id: str
    node_count: int
    bytes: int


@dataclass(frozen=True)
class PrunedBranches:
    """The nodes of a kept session that its head does not reach, which a prune deletes (in the
    order stored), and the bytes of their stored turns and kept lines."""

    session_id: str
    node_ids: tuple[str, ...]
    bytes: int


@dataclass(frozen=True)
class PruneReport:
    """What a prune deletes (`deleted`: it did; else a dry run: it would), and the usage of the
    branches' model calls it keeps as their sessions' totals (`pruned_usage`)."""

    sessions: tuple[PrunedSession, ...] = ()
    branches: tuple[PrunedBranches, ...] = ()
    deleted: bool = False
    rolled_up: UsageRollup = field(default_factory=UsageRollup)

    @property
    def node_count(self) -> int:
        """Every node deleted, whole sessions' and branches' alike."""
        whole = sum(session.node_count for session in self.sessions)
        return whole + sum(len(branch.node_ids) for branch in self.branches)

    @property
    def bytes(self) -> int:
        """The bytes of the stored turns and kept lines deleted (the space a database frees for
        reuse; SQLite's file shrinks only after `VACUUM`)."""
        whole = sum(session.bytes for session in self.sessions)
        return whole + sum(branch.bytes for branch in self.branches)


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _expires_at(now: int) -> ColumnElement[Any]:
    """Each session's expiry time (NULL: never), as the module docstring says."""
    tag_default = (
        select(func.max(expiry_defaults.c.after_ms))
        .join(session_tags, session_tags.c.tag == expiry_defaults.c.tag)
        .where(
            of_tenant(expiry_defaults),
            of_tenant(session_tags),
            expiry_defaults.c.scope == "tag",
            session_tags.c.session_id == sessions.c.id,
        )
        .scalar_subquery()
    )
    store_default = (
        select(expiry_defaults.c.after_ms)
        .where(of_tenant(expiry_defaults), expiry_defaults.c.scope == "store")
        .scalar_subquery()
    )
    lasting = func.coalesce(tag_default, store_default)
    return func.coalesce(sessions.c.expires_at, sessions.c.updated_at + lasting)


def _selected_sessions(filters: PruneFilters, now: int) -> Select[Any]:
    """The ids of the sessions the session filters select, in order."""
    query = select(sessions.c.id).where(NOT_IMPORTING).order_by(sessions.c.id)
    if filters.older_than is not None:
        query = query.where(sessions.c.updated_at < now - filters.older_than)
    if filters.tag is not None:
        tagged = select(session_tags.c.session_id).where(
            of_tenant(session_tags), session_tags.c.tag == filters.tag
        )
        query = query.where(sessions.c.id.in_(tagged))
    if filters.expired:
        query = query.where(_expires_at(now) <= now)
    return query


def _sizes(backend: Backend, ids: Sequence[str]) -> Plan[dict[str, tuple[int, int]]]:
    """Per session of `ids` that has nodes: their count and bytes, with its kept lines'."""
    found: dict[str, tuple[int, int]] = {}
    for chunk in _chunks(ids):
        turns = (
            yield select(
                nodes.c.session_id,
                func.count(),
                func.sum(backend.byte_length(nodes.c.turn_json)),
            )
            .where(of_tenant(nodes), nodes.c.session_id.in_(chunk))
            .group_by(nodes.c.session_id)
        )
        for session_id, count, size in turns:
            found[session_id] = (count, int(size or 0))
        lines = (
            yield select(records.c.session_id, func.sum(backend.byte_length(records.c.raw)))
            .where(of_tenant(records), records.c.session_id.in_(chunk), records.c.raw.is_not(None))
            .group_by(records.c.session_id)
        )
        for session_id, size in lines:
            count, turn_bytes = found.get(session_id, (0, 0))
            found[session_id] = (count, turn_bytes + int(size or 0))
    return found


def _whole_sessions(
    backend: Backend, filters: PruneFilters, now: int, delete_: bool
) -> Plan[tuple[PrunedSession, ...]]:
    """The sessions the session filters select (locked when deleting), deleted if `delete_`."""
    query = _selected_sessions(filters, now)
    ids: list[str] = list((yield query.with_for_update() if delete_ else query).scalars())
    sizes = yield from _sizes(backend, ids)
    if delete_:
        yield from record_summary_subjects(dict.fromkeys(ids))
        for chunk in _chunks(ids):
            # Unlink parents first, as `delete_session` does: a cascade through the parent key
            # recurses once per level, which SQLite refuses beyond 1,000 levels.
            yield (
                update(nodes)
                .where(
                    of_tenant(nodes), nodes.c.session_id.in_(chunk), nodes.c.parent_id.is_not(None)
                )
                .values(parent_id=None)
            )
            yield delete(sessions).where(of_tenant(sessions), sessions.c.id.in_(chunk))
    return tuple(PrunedSession(id, *sizes.get(id, (0, 0))) for id in ids)


def _with_other_tips(spared: Select[Any] | None) -> Select[Any]:
    """The sessions (outside `spared`) with a tip that is not their head: only these can hold
    a node their head does not reach (every node leads to some tip, and a head that is the
    only tip is reached from every node)."""
    child = nodes.alias("child")
    has_child = exists().where(
        of_tenant(child), child.c.session_id == nodes.c.session_id, child.c.parent_id == nodes.c.id
    )
    query = select(sessions.c.id).where(NOT_IMPORTING)
    if spared is not None:
        query = query.where(sessions.c.id.not_in(spared))
    return query.where(
        exists().where(
            of_tenant(nodes),
            nodes.c.session_id == sessions.c.id,
            nodes.c.id != func.coalesce(sessions.c.head, ""),
            ~has_child,
        )
    ).order_by(sessions.c.id)


def _unreached(backend: Backend, session_ids: Sequence[str]) -> Select[Any]:
    """The nodes of `session_ids` that their heads do not reach, in the order stored: every
    node but the head's ancestors (a session without a head reaches none of its nodes)."""
    reach = (
        select(sessions.c.id.label("session_id"), sessions.c.head.label("id"))
        .where(of_tenant(sessions), sessions.c.id.in_(session_ids), sessions.c.head.is_not(None))
        .cte("reach", recursive=True)
    )
    parent = nodes.alias("parent")
    reach = reach.union(
        select(parent.c.session_id, parent.c.parent_id).where(
            of_tenant(parent),
            parent.c.session_id == reach.c.session_id,
            parent.c.id == reach.c.id,
            parent.c.parent_id.is_not(None),
        )
    )
    reached = exists().where(reach.c.session_id == nodes.c.session_id, reach.c.id == nodes.c.id)
    lines = (
        select(func.sum(backend.byte_length(records.c.raw)))
        .where(
            of_tenant(records),
            records.c.session_id == nodes.c.session_id,
            records.c.node_id == nodes.c.id,
        )
        .scalar_subquery()
    )
    size = backend.byte_length(nodes.c.turn_json) + func.coalesce(lines, 0)
    return (
        select(nodes.c.session_id, nodes.c.id, size)
        .where(of_tenant(nodes), nodes.c.session_id.in_(session_ids), ~reached)
        .order_by(nodes.c.session_id, nodes.c.pk)
    )


def _unreached_branches(
    backend: Backend, spared: Select[Any] | None, delete_: bool
) -> Plan[tuple[tuple[PrunedBranches, ...], UsageRollup]]:
    """The nodes no head reaches in the sessions outside `spared`, and their usage, deleted
    (their usage rolled up) if `delete_`."""
    candidates = _with_other_tips(spared)
    ids: list[str] = list((yield candidates.with_for_update() if delete_ else candidates).scalars())
    found: dict[str, tuple[list[str], int]] = {}
    for chunk in _chunks(ids):
        for session_id, node_id, size in (yield _unreached(backend, chunk)):
            node_ids, total = found.get(session_id, ([], 0))
            node_ids.append(node_id)
            found[session_id] = (node_ids, total + int(size or 0))
    by_session = {session_id: node_ids for session_id, (node_ids, _) in found.items()}
    rolled_up = yield from roll_up(backend, by_session, write=delete_)
    if delete_:
        yield from record_summary_subjects(by_session)
        # Unlink every pruned node before deleting any: deleting a chunk whose nodes are
        # parents of the next chunk's would cascade down the rest of the chain, once per
        # level, which SQLite refuses beyond 1,000 levels. (A pruned node's children are
        # all pruned too: what no head reaches, nothing below it reaches either.)
        of_branches = [
            and_(of_tenant(nodes), nodes.c.session_id == session_id, nodes.c.id.in_(chunk))
            for session_id, (node_ids, _) in found.items()
            for chunk in _chunks(node_ids)
        ]
        for of_branch in of_branches:
            yield update(nodes).where(of_branch).values(parent_id=None)
        for of_branch in of_branches:
            yield delete(nodes).where(of_branch)
        for session_id, (node_ids, _) in found.items():  # their usage and key lines too
            for chunk in _chunks(node_ids):
                yield delete(records).where(
                    of_tenant(records), records.c.session_id == session_id, node_lines_of(chunk)
                )
    branches = tuple(
        PrunedBranches(session_id, tuple(node_ids), size)
        for session_id, (node_ids, size) in found.items()
    )
    return branches, rolled_up


def prune(backend: Backend, filters: PruneFilters, now: int, *, delete_: bool) -> Plan[PruneReport]:
    """What `filters` select (see the module docstring), deleted if `delete_`.

    Raises:
        InvalidArgumentError: no filter was given, or `older_than` is negative.
    """
    if not (filters.selects_sessions or filters.unreachable):
        raise InvalidArgumentError(
            "prune needs a filter: older_than, tag, expired or unreachable (none deletes all)"
        )
    if filters.older_than is not None and filters.older_than < 0:
        raise InvalidArgumentError(f"older_than is a duration >= 0, not {filters.older_than!r}")
    whole: tuple[PrunedSession, ...] = ()
    if filters.selects_sessions:
        whole = yield from _whole_sessions(backend, filters, now, delete_)
    branches: tuple[PrunedBranches, ...] = ()
    rolled_up = UsageRollup()
    if filters.unreachable:
        spared = None
        if filters.selects_sessions:  # deleted whole already, or to be in a dry run
            spared = _selected_sessions(filters, now).order_by(None)
        branches, rolled_up = yield from _unreached_branches(backend, spared, delete_)
    return PruneReport(whole, branches, deleted=delete_, rolled_up=rolled_up)


def set_expiry_default(after_ms: int | None, tag: str | None) -> Plan[None]:
    """Set (None: remove) the store's default expiry, or `tag`'s."""
    scope, key = ("store", "") if tag is None else ("tag", tag)
    where = and_(
        of_tenant(expiry_defaults), expiry_defaults.c.scope == scope, expiry_defaults.c.tag == key
    )
    yield delete(expiry_defaults).where(where)
    if after_ms is not None:
        yield insert(expiry_defaults).values(tenant=TENANT, scope=scope, tag=key, after_ms=after_ms)


def expiry_defaults_of() -> Plan[ExpiryDefaults]:
    """The store's default expiry and its tags'."""
    query = select(expiry_defaults).where(of_tenant(expiry_defaults))
    rows = yield query.order_by(expiry_defaults.c.scope, expiry_defaults.c.tag)
    store: int | None = None
    tags: dict[str, int] = {}
    for row in rows:
        if row.scope == "store":
            store = row.after_ms
        else:
            tags[row.tag] = row.after_ms
    return ExpiryDefaults(store, tags)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def duration_ms(value: timedelta, name: str) -> int:
    """A duration argument in ms.

    Raises:
        InvalidArgumentError: it is no `timedelta`, or negative.
    """
    if not isinstance(value, timedelta):
        raise InvalidArgumentError(f"{name} is a datetime.timedelta, not {value!r}")
    if value < timedelta(0):
        raise InvalidArgumentError(f"{name} is a duration >= 0, not {value}")
    return value // _MS


def epoch_ms(value: int | datetime | Unset | None) -> int | Unset | None:
    """An expiry argument in epoch ms (None and UNSET as they are).

    Raises:
        InvalidArgumentError: a naive datetime, or no whole number of ms >= 0.
    """
    if value is None or isinstance(value, Unset):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidArgumentError(
                f"expires_at: give a datetime with a time zone, not the naive {value}"
            )
        value = (value - _EPOCH) // _MS
    if type(value) is not int or not 0 <= value < 2**63:
        raise InvalidArgumentError(f"expires_at is epoch ms >= 0 or a datetime, not {value!r}")
    return value


def set_expiry(session_ids: Sequence[str], expiry: Expiry) -> Plan[None]:
    """Give every one of `session_ids` the expiry `expiry`, all or none: in the one
    transaction the plan runs in, every session must exist (and not be being imported).

    Raises:
        InvalidArgumentError: no session ids, a bad id, or an expiry that is no epoch ms >= 0
            or aware datetime.
        UnknownSessionError: the first of `session_ids` the store does not hold (nothing is
            changed).
    """
    if isinstance(session_ids, str) or not session_ids:
        raise InvalidArgumentError(f"session_ids is a non-empty list of ids, not {session_ids!r}")
    wanted = list(dict.fromkeys(session_ids))
    for session_id in wanted:
        validate_session_id(session_id)
    expires_at = epoch_ms(expiry)
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        held = yield select(sessions.c.id).where(NOT_IMPORTING, sessions.c.id.in_(chunk))
        found = set(held.scalars())
        missing = next((session_id for session_id in chunk if session_id not in found), None)
        if missing is not None:
            raise UnknownSessionError(f"no session {missing!r}")
        changed = yield (
            update(sessions)
            .where(NOT_IMPORTING, sessions.c.id.in_(chunk))
            .values(expires_at=expires_at)
        )
        if changed.rowcount != len(chunk):  # a session deleted since the check (PostgreSQL)
            raise UnknownSessionError(f"a session of {chunk!r} was deleted meanwhile")
