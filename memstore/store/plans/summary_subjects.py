"""What erasure by subject needs to reach a summary once a prune deleted what it condensed
(`summary_subjects`, migration 0035).

A summary (a node recording `memstore.condensed` with a `fromNodeId`) tells what it was made
from by the path from the root to its `fromNodeId`, which erasure walks (`plans.erasure`). Once
a prune has deleted the `fromNodeId` from every session that held it, that path can no longer
be found, and nothing would tell an erasure that the summary holds a subject's turns. So before
it deletes a summary's `fromNodeId` from a session, and keeps the summary, a prune records for
the summary the sha256 of `key NUL value` for each top-level string field (but `role`) of each
turn on that path (the fields an erasure by subject matches), and for a summary on it (a summary
of summaries) its own recorded hashes and those of the path it condensed. No plaintext is kept.
`erase(subject=(key, value))` tombstones the summaries recorded under its hash; a summary
tombstoned or deleted loses its rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import and_, bindparam, insert, select

from memstore import jsjson
from memstore.store.plans.contract import Plan
from memstore.store.tables import (
    NOT_IMPORTING,
    TENANT,
    nodes,
    of_tenant,
    sessions,
    summary_subjects,
)

__all__ = [
    "NOT_IMPORTING_NODE",
    "anchor_of",
    "record_summary_subjects",
    "subject_hash",
    "summaries_of_subject",
]

CHUNK = 500
Key = tuple[str, str]  # (session id, node id)
Pruned = Mapping[str, Sequence[str] | None]  # by session, the node ids pruned (None: all)

NOT_IMPORTING_NODE = and_(
    of_tenant(nodes), nodes.c.session_id.in_(select(sessions.c.id).where(NOT_IMPORTING))
)


def subject_hash(key: str, value: str) -> str:
    """The hex sha256 that stands for a turn's field `key` = `value`, as a subject names it."""
    return hashlib.sha256(f"{key}\0{value}".encode()).hexdigest()


def anchor_of(turn_json: str) -> str | None:
    """A summary's `memstore.condensed.fromNodeId`: the head of the path it condensed."""
    if '"condensed"' not in turn_json:
        return None
    record = (jsjson.loads(turn_json).get("memstore") or {}).get("condensed")
    anchor = record.get("fromNodeId") if isinstance(record, dict) else None
    return anchor if isinstance(anchor, str) else None


def _subjects(turn_json: str) -> set[str]:
    """The hashes of a turn's top-level string fields but its role."""
    turn = jsjson.loads(turn_json)
    return {
        subject_hash(key, value)
        for key, value in turn.items()
        if isinstance(value, str) and key != "role"
    }


def _chunks(items: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), CHUNK):
        yield list(items[start : start + CHUNK])


def _is_pruned(pruned: Pruned, key: Key) -> bool:
    if key[0] not in pruned:
        return False
    ids = pruned[key[0]]
    return ids is None or key[1] in ids


def _kept_summaries(pruned: Pruned) -> Plan[dict[str, list[Key]]]:
    """The summaries the prune keeps, by the `fromNodeId` each condensed."""
    rows = yield select(nodes.c.session_id, nodes.c.id, nodes.c.turn_json).where(
        NOT_IMPORTING_NODE, nodes.c.turn_json.contains('"condensed"', autoescape=True)
    )
    found: dict[str, list[Key]] = {}
    for session_id, node_id, turn_json in rows:
        anchor = anchor_of(turn_json)
        if anchor is not None and not _is_pruned(pruned, (session_id, node_id)):
            found.setdefault(anchor, []).append((session_id, node_id))
    return found


def _holders(pruned: Pruned, anchors: Sequence[str]) -> Plan[dict[str, set[str]]]:
    """By pruned session, the anchors among `anchors` that the prune deletes from it."""
    held: dict[str, set[str]] = {}
    whole = sorted(session_id for session_id, ids in pruned.items() if ids is None)
    for session_id, ids in pruned.items():
        if ids is not None and (found := set(ids) & set(anchors)):
            held[session_id] = found
    for sessions_chunk in _chunks(whole):
        for anchors_chunk in _chunks(anchors):
            rows = yield select(nodes.c.session_id, nodes.c.id).where(
                of_tenant(nodes),
                nodes.c.session_id.in_(sessions_chunk),
                nodes.c.id.in_(anchors_chunk),
            )
            for session_id, node_id in rows:
                held.setdefault(session_id, set()).add(node_id)
    return held


@dataclass
class _Paths:
    """The nodes of some sessions (parents, turns) and the hashes recorded for them."""

    parent: dict[Key, str | None] = field(default_factory=dict)
    turn: dict[Key, str] = field(default_factory=dict)
    recorded: dict[Key, set[str]] = field(default_factory=dict)

    def condensed(self, session_id: str, anchor: str, seen: set[Key]) -> set[str]:
        """The hashes of the path from the root to `anchor` in `session_id`, with those of
        the summaries on it (recorded, and of the paths they condensed)."""
        found: set[str] = set()
        node: str | None = anchor
        while node is not None and (key := (session_id, node)) in self.turn and key not in seen:
            seen.add(key)
            found |= _subjects(self.turn[key]) | self.recorded.get(key, set())
            inner = anchor_of(self.turn[key])
            if inner is not None:
                found |= self.condensed(session_id, inner, seen)
            node = self.parent[key]
        return found


def _load(session_ids: Sequence[str]) -> Plan[_Paths]:
    paths = _Paths()
    for chunk in _chunks(session_ids):
        rows = yield select(
            nodes.c.session_id, nodes.c.id, nodes.c.parent_id, nodes.c.turn_json
        ).where(of_tenant(nodes), nodes.c.session_id.in_(chunk))
        for session_id, node_id, parent_id, turn_json in rows:
            paths.parent[(session_id, node_id)] = parent_id
            paths.turn[(session_id, node_id)] = turn_json
        recorded = yield select(
            summary_subjects.c.session_id,
            summary_subjects.c.node_id,
            summary_subjects.c.subject_hash,
        ).where(of_tenant(summary_subjects), summary_subjects.c.session_id.in_(chunk))
        for session_id, node_id, hashed in recorded:
            paths.recorded.setdefault((session_id, node_id), set()).add(hashed)
    return paths


def _held_rows(keys: Sequence[Key]) -> Plan[set[tuple[str, str, str]]]:
    """The `summary_subjects` rows of the summaries `keys` already."""
    held: set[tuple[str, str, str]] = set()
    for session_id in sorted({key[0] for key in keys}):
        ids = sorted({key[1] for key in keys if key[0] == session_id})
        for chunk in _chunks(ids):
            rows = yield select(
                summary_subjects.c.session_id,
                summary_subjects.c.node_id,
                summary_subjects.c.subject_hash,
            ).where(
                of_tenant(summary_subjects),
                summary_subjects.c.session_id == session_id,
                summary_subjects.c.node_id.in_(chunk),
            )
            held |= {(row[0], row[1], row[2]) for row in rows}
    return held


_INSERT = insert(summary_subjects).values(
    tenant=TENANT,
    session_id=bindparam("s"),
    node_id=bindparam("n"),
    subject_hash=bindparam("h"),
)


def record_summary_subjects(pruned: Pruned) -> Plan[int]:
    """Before a prune deletes `pruned`, record the hashes of what each summary it keeps
    condensed, where it deletes that summary's `fromNodeId` (see the module); the count of
    the summaries given rows."""
    if not pruned:
        return 0
    summaries = yield from _kept_summaries(pruned)
    if not summaries:
        return 0
    held = yield from _holders(pruned, sorted(summaries))
    if not held:
        return 0
    paths = yield from _load(sorted(held))
    wanted: dict[Key, set[str]] = {}
    for session_id, anchors in held.items():
        for anchor in anchors:
            hashes = paths.condensed(session_id, anchor, set())
            for summary in summaries[anchor]:
                wanted.setdefault(summary, set()).update(hashes)
    existing = yield from _held_rows(sorted(wanted))
    rows = [
        {"s": session_id, "n": node_id, "h": hashed}
        for (session_id, node_id), hashes in sorted(wanted.items())
        for hashed in sorted(hashes)
        if (session_id, node_id, hashed) not in existing
    ]
    for start in range(0, len(rows), CHUNK):
        yield _INSERT, rows[start : start + CHUNK]
    return len(wanted)


def summaries_of_subject(key: str, value: str) -> Plan[set[Key]]:
    """The summaries recorded as made from turns with `key` = `value` (in visible sessions)."""
    rows = yield select(summary_subjects.c.session_id, summary_subjects.c.node_id).where(
        of_tenant(summary_subjects),
        summary_subjects.c.subject_hash == subject_hash(key, value),
        summary_subjects.c.session_id.in_(select(sessions.c.id).where(NOT_IMPORTING)),
    )
    return {(row[0], row[1]) for row in rows}
