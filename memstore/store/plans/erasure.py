"""Erasure: a session, a node or a subject's turns removed with every copy memstore made of them.

What is erased (the *targets*): a whole session; one node; or a subject, `key` = `value`: the
sessions whose metadata has it (erased whole) and the nodes whose turn has it as a top-level key
(the turn's extra keys, which memstore keeps). Then, until nothing more is found:

- a *copy* of an erased node: a node with the very same turn text in the same session (the tail
  compaction re-appended) or in a session that shares node ids with it (a fork, or what it was
  forked from);
- a *summary* made from an erased node: a node whose turn records `memstore.condensed` with a
  `fromNodeId` whose path from the root (in any session that holds it) holds an erased node
  (compaction's and the importers' summaries; a summary of summaries too); and, for a subject,
  a summary whose condensed turns a prune deleted, found by the hash of `key`, `value` that the
  prune recorded (`summary_subjects`).

A session erased whole is deleted (with its nodes, blocks, lines, usage, keys and index rows).
Every other node found keeps its id, parent, role and time; its turn becomes a tombstone
(`tombstone`), and its derived rows are rewritten from it: blocks, search text and vectors, the
full-text index (SQLite's triggers), `records.raw` (the export derives the line from the
tombstone), and its `node_usage`, `node_keys` and `summary_subjects` rows are deleted, with the
lines of the log that carried them (`node_lines_of`), so an export holds neither. Each erasure
writes one `erasures` row, its receipt. On SQLite the writing transaction runs with `secure_delete`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import (
    bindparam,
    delete,
    insert,
    select,
    text,
    update,
)

from memstore import jsjson
from memstore.errors import InvalidArgumentError, UnknownNodeError, UnknownSessionError
from memstore.store.node_lines import node_lines_of
from memstore.store.plans.appends import INSERT_BLOCKS
from memstore.store.plans.contract import Plan
from memstore.store.plans.nodes import lookup_id
from memstore.store.plans.summary_subjects import (
    NOT_IMPORTING_NODE,
    anchor_of,
    summaries_of_subject,
)
from memstore.store.policy import Backend
from memstore.store.rows import stored_rows
from memstore.store.tables import (
    NOT_IMPORTING,
    TENANT,
    erasures,
    node_blocks,
    node_keys,
    node_usage,
    nodes,
    of_tenant,
    records,
    sessions,
    stored_on,
    summary_subjects,
)
from memstore.tombstones import ERASED_TEXT, tombstone

__all__ = ["ERASED_TEXT", "ErasureReport", "ErasureTarget", "erase", "tombstone"]

CHUNK = 500
_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
Key = tuple[str, str]  # (session id, node id)


@dataclass(frozen=True)
class ErasureTarget:
    """What an erasure is asked to reach: `scope` 'session' (`session_id`), 'node'
    (`session_id`, `node_id`) or 'subject' (`key` = `value`)."""

    scope: str
    session_id: str | None = None
    node_id: str | None = None
    key: str | None = None
    value: str | None = None

    @property
    def label(self) -> str:
        """The receipt's `target`: the session id, `session/node`, or `key=value`."""
        if self.scope == "session":
            return str(self.session_id)
        if self.scope == "node":
            return f"{self.session_id}/{self.node_id}"
        return f"{self.key}={self.value}"


@dataclass(frozen=True)
class ErasureReport:
    """What an erasure removed (`erased`; else a dry run: what it would): the sessions deleted
    whole, and per other session the nodes tombstoned (the targets, their copies and the
    summaries made from them, `summaries` among them). `receipt` is the `erasures` row's id;
    `session_nodes` says how many nodes each session deleted whole held."""

    scope: str
    target: str
    reason: str
    sessions: tuple[str, ...] = ()
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    summaries: int = 0
    erased: bool = False
    receipt: int | None = None
    session_nodes: Mapping[str, int] = field(default_factory=dict)

    @property
    def node_count(self) -> int:
        """The nodes tombstoned (the nodes of sessions deleted whole are not counted)."""
        return sum(len(ids) for ids in self.nodes.values())


ARGUMENTS = {"reason": "reason", "session": "session_id", "node": "node_id", "subject": "subject"}
"""How `target_of`'s refusals name the arguments: `erase`'s (the command line: its options)."""


def target_of(
    session_id: str | None,
    node_id: str | None,
    subject: tuple[str, str] | None,
    reason: str,
    names: Mapping[str, str] = ARGUMENTS,
) -> ErasureTarget:
    """The target the arguments name.

    Raises:
        InvalidArgumentError: no reason; not exactly one of a session, a node (with its
            session) or a subject; a subject's key is not a plain name (each as `names` says).
    """
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgumentError(
            f"{names['reason']}: say why this is erased (it goes in the receipt)"
        )
    if subject is not None:
        if session_id is not None or node_id is not None:
            raise InvalidArgumentError(
                f"erase a subject ({names['subject']}), or a session or node "
                f"({names['session']}, {names['node']}): not both"
            )
        if not (isinstance(subject, tuple) and len(subject) == 2):
            raise InvalidArgumentError(f"subject is a (key, value) pair, not {subject!r}")
        key, value = subject
        if not isinstance(key, str) or _KEY.fullmatch(key) is None:
            raise InvalidArgumentError(
                f"{names['subject']} key {key!r}: letters, digits and _.:- only"
            )
        if not isinstance(value, str) or not value:
            raise InvalidArgumentError(
                f"{names['subject']} value is a non-empty string, not {value!r}"
            )
        return ErasureTarget("subject", key=key, value=value)
    if session_id is None:
        raise InvalidArgumentError(
            f"erase needs {names['session']} (with {names['node']}: one node) or {names['subject']}"
        )
    return ErasureTarget("node" if node_id is not None else "session", session_id, node_id)


def _subject_in_turn(backend: Backend, key: str) -> tuple[Any, Any]:
    """The SQL of whether a turn's top-level `key` is a string, and its value."""
    return backend.json_string(nodes.c.turn_json, key)


def _seeds(backend: Backend, target: ErasureTarget) -> Plan[tuple[set[str], set[Key]]]:
    """The sessions to delete whole and the nodes to tombstone that the target names.

    Raises:
        UnknownSessionError, UnknownNodeError: the session or node named does not exist.
    """
    if target.scope == "subject":
        assert target.key is not None
        matched = sessions.c.meta[target.key].as_string() == target.value
        whole = set((yield select(sessions.c.id).where(NOT_IMPORTING, matched)).scalars())
        is_text, found_value = _subject_in_turn(backend, target.key)
        rows = yield select(nodes.c.session_id, nodes.c.id).where(
            NOT_IMPORTING_NODE, is_text, found_value == target.value
        )
        return whole, {(row[0], row[1]) for row in rows if row[0] not in whole}
    assert target.session_id is not None
    key = lookup_id(target.session_id)
    found = (yield select(sessions.c.id).where(sessions.c.id == key, NOT_IMPORTING)).first()
    if found is None:
        raise UnknownSessionError(f"no session {target.session_id!r}")
    if target.scope == "session":
        return {key}, set()
    node = (
        yield select(nodes.c.id).where(
            of_tenant(nodes), nodes.c.session_id == key, nodes.c.id == target.node_id
        )
    ).first()
    if node is None:
        raise UnknownNodeError(target.session_id, str(target.node_id))
    return set(), {(key, str(target.node_id))}


@dataclass
class _Graph:
    """The nodes of the sessions an erasure may reach: parents, turn texts, summaries' anchors."""

    parent: dict[Key, str | None] = field(default_factory=dict)
    role: dict[Key, str] = field(default_factory=dict)
    turn: dict[Key, str] = field(default_factory=dict)
    created: dict[Key, int] = field(default_factory=dict)
    anchor: dict[Key, str] = field(default_factory=dict)  # summary -> the fromNodeId condensed
    holder: dict[str, str] = field(default_factory=dict)  # node id -> a session holding it

    def path(self, session_id: str, leaf: str) -> Iterable[Key]:
        """The keys from `leaf` up to its root: in `session_id`, else in a session that holds
        `leaf`. A node id is the content address of its whole ancestry, so every session that
        holds it holds the same path (a fork's copy of the branch a prune deleted here)."""
        if (session_id, leaf) not in self.parent:
            session_id = self.holder.get(leaf, session_id)
        node: str | None = leaf
        seen: set[str] = set()
        while node is not None and node not in seen and (session_id, node) in self.parent:
            seen.add(node)
            yield session_id, node
            node = self.parent[(session_id, node)]


def _related(session_ids: set[str]) -> Plan[set[str]]:
    """`session_ids` and the sessions that share a node id with one of them (forks).

    No index leads from a node id to its sessions, so one scan of `nodes` answers, in the one
    form both planners keep to; sessions being imported are dropped after. (Asked together
    with the sessions' visibility, SQLite probed every visible session for every id, 20
    million lookups for 200 sessions of 500 turns, and PostgreSQL every node of every session,
    for one session's erasure; an index on `nodes.id` would make this a lookup per id.)"""
    related = set(session_ids)
    ordered = sorted(session_ids)
    for start in range(0, len(ordered), CHUNK):
        chunk = ordered[start : start + CHUNK]
        ids = select(nodes.c.id).where(of_tenant(nodes), nodes.c.session_id.in_(chunk))
        rows = (
            yield select(nodes.c.session_id).where(of_tenant(nodes), nodes.c.id.in_(ids)).distinct()
        )
        related.update(rows.scalars())
    importing = yield select(sessions.c.id).where(
        of_tenant(sessions), sessions.c.importing.is_not(None)
    )
    return (related - set(importing.scalars())) | session_ids


def _load(session_ids: set[str]) -> Plan[_Graph]:
    graph = _Graph()
    ordered = sorted(session_ids)
    columns = (nodes.c.session_id, nodes.c.id, nodes.c.parent_id, nodes.c.role)
    for start in range(0, len(ordered), CHUNK):
        chunk = ordered[start : start + CHUNK]
        rows = yield select(*columns, nodes.c.created_at, nodes.c.turn_json).where(
            of_tenant(nodes), nodes.c.session_id.in_(chunk)
        )
        for session_id, node_id, parent_id, role, created_at, turn_json in rows:
            key = (session_id, node_id)
            graph.parent[key] = parent_id
            graph.role[key] = role
            graph.created[key] = created_at
            graph.turn[key] = turn_json
            graph.holder.setdefault(node_id, session_id)
            anchor = anchor_of(turn_json)
            if anchor is not None:
                graph.anchor[key] = anchor
    return graph


def _summaries_elsewhere(graph: _Graph, loaded: set[str]) -> Plan[set[str]]:
    """The sessions outside `loaded` with a compaction summary (a root that records
    `memstore.condensed`) of a path a loaded session holds: once a prune deleted the condensed
    branch from the summary's own session, a fork of it may be all that still holds it, and
    the two sessions then share no node id."""
    rows = yield select(nodes.c.session_id, nodes.c.turn_json).where(
        NOT_IMPORTING_NODE,
        nodes.c.parent_id.is_(None),
        nodes.c.turn_json.contains('"condensed"', autoescape=True),
    )
    return {
        session_id
        for session_id, turn_json in rows
        if session_id not in loaded and anchor_of(turn_json) in graph.holder
    }


def _closure(graph: _Graph, seeds: set[Key]) -> tuple[set[Key], set[Key]]:
    """Every node to tombstone, from `seeds`: their copies and the summaries made from them,
    until nothing more is found; and the summaries among them."""
    erased = set(seeds)
    summaries: set[Key] = set()
    while True:
        texts = {graph.turn[key] for key in erased if key in graph.turn}
        found = {key for key, turn in graph.turn.items() if turn in texts}
        for summary, anchor in graph.anchor.items():
            if summary not in erased and any(
                key in erased or key in found for key in graph.path(summary[0], anchor)
            ):
                found.add(summary)
                summaries.add(summary)
        if found <= erased:
            return erased, summaries
        erased |= found


def _tombstone_rows(
    backend: Backend, graph: _Graph, keys: Sequence[Key], erased_at: int, receipt: int
) -> Plan[None]:
    """Rewrite each node of `keys` as its tombstone, with the rows derived from it."""
    updated = [
        name
        for name in (
            "turn_json",
            "search_chars",
            "search_vector",
            "search_chars_vector",
        )
        if stored_on(nodes.c[name], backend.name)
    ]
    statement = (
        update(nodes)
        .where(of_tenant(nodes), nodes.c.session_id == bindparam("s"), nodes.c.id == bindparam("i"))
        .values({name: bindparam(f"v_{name}", type_=nodes.c[name].type) for name in updated})
    )
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start : start + CHUNK]
        node_rows: list[dict[str, Any]] = []
        block_rows: list[dict[str, Any]] = []
        for session_id, node_id in chunk:
            key = (session_id, node_id)
            turn = tombstone(graph.role[key], graph.turn[key], erased_at, receipt)
            turn_json = jsjson.dumps(turn)
            row, blocks = stored_rows(
                session_id, node_id, graph.parent[key], graph.created[key], turn, turn_json
            )
            node_rows.append({"s": session_id, "i": node_id, **{f"v_{n}": row[n] for n in updated}})
            block_rows.extend(blocks)
        by_session: dict[str, list[str]] = {}
        for session_id, node_id in chunk:
            by_session.setdefault(session_id, []).append(node_id)
        for session_id, ids in by_session.items():
            # a statement per session, not per node: no index leads to `records` and
            # `node_keys` rows by node, so each statement scans its session's rows once
            for table in (node_blocks, node_usage, node_keys, summary_subjects):
                yield delete(table).where(
                    of_tenant(table), table.c.session_id == session_id, table.c.node_id.in_(ids)
                )
            yield (
                update(records)
                .where(
                    of_tenant(records),
                    records.c.session_id == session_id,
                    records.c.node_id.in_(ids),
                )
                .values(raw=None)
            )
            yield delete(records).where(
                of_tenant(records), records.c.session_id == session_id, node_lines_of(ids)
            )
        yield statement, node_rows
        if block_rows:
            yield INSERT_BLOCKS, block_rows


def _delete_sessions(ids: Sequence[str]) -> Plan[None]:
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        # unlink parents first, as `delete_session` does (SQLite's cascade depth)
        unlinked = update(nodes).where(of_tenant(nodes), nodes.c.session_id.in_(chunk))
        yield unlinked.values(parent_id=None)
        yield delete(sessions).where(of_tenant(sessions), sessions.c.id.in_(chunk))


def erase(
    backend: Backend, target: ErasureTarget, reason: str, now: int, *, erase_: bool
) -> Plan[ErasureReport]:
    """What `target` reaches (see the module docstring), erased if `erase_`, with a receipt.

    Raises:
        UnknownSessionError, UnknownNodeError: the session or node named does not exist.
    """
    if erase_ and backend.secure_delete:
        yield text("PRAGMA secure_delete = ON")
    whole, seeds = yield from _seeds(backend, target)
    hashed: set[Key] = set()  # summaries of the subject's turns that a prune deleted
    if target.key is not None and target.value is not None:
        hashed = yield from summaries_of_subject(target.key, target.value)
        seeds |= {key for key in hashed if key[0] not in whole}
    affected = whole | {session_id for session_id, _ in seeds}
    loaded = (yield from _related(affected)) if affected else set()
    graph = yield from _load(loaded)
    elsewhere = (yield from _summaries_elsewhere(graph, loaded)) if affected else set()
    if elsewhere:
        graph = yield from _load(loaded | (yield from _related(elsewhere)))
    whole_nodes = {key for key in graph.turn if key[0] in whole}
    reached, summaries = _closure(graph, seeds | whole_nodes)
    summaries |= hashed
    kept = sorted(key for key in reached if key[0] not in whole)
    by_session: dict[str, tuple[str, ...]] = {}
    for session_id, node_id in kept:
        by_session[session_id] = (*by_session.get(session_id, ()), node_id)
    report = ErasureReport(
        target.scope,
        target.label,
        reason,
        tuple(sorted(whole)),
        by_session,
        sum(1 for key in summaries if key[0] not in whole),
        session_nodes=dict(Counter(session_id for session_id, _ in whole_nodes)),
    )
    if not erase_:
        return report
    targets = {
        "sessions": list(report.sessions),
        "nodes": {s: list(i) for s, i in by_session.items()},
    }
    receipt = (
        yield insert(erasures)
        .values(
            tenant=TENANT,
            erased_at=now,
            scope=target.scope,
            target=target.label,
            reason=reason,
            sessions_deleted=len(report.sessions),
            nodes_erased=report.node_count,
            summaries_erased=report.summaries,
            targets_json=json.dumps(targets, separators=(",", ":")),
        )
        .returning(erasures.c.id)
    ).scalar_one_or_none()
    yield from _tombstone_rows(backend, graph, kept, now, int(receipt))
    yield from _delete_sessions(report.sessions)
    if backend.secure_delete:
        yield text("PRAGMA secure_delete = OFF")
    return replace(report, erased=True, receipt=int(receipt))
