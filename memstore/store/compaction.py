"""Compacting a stored session: its head's path condensed onto a new branch, the old one kept.

The summary becomes a new root node and the kept tail is re-appended after it; the head moves to
the new branch's last node. The model is called between a read and a write transaction, never
inside one; the write is a compare-and-set against the head that was read, so a concurrent
writer makes it fail with HeadMovedError and nothing is appended.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from sqlalchemy import select

from memstore.condense import (
    check_window,
    compact,
    estimate_context_tokens,
    find_cut_point,
    stream_events,
)
from memstore.errors import UnknownSessionError
from memstore.graph import SessionGraph, system_clock
from memstore.redact import Redactor, apply_redactor
from memstore.store import plans
from memstore.store.plans import Plan
from memstore.store.policy import Backend
from memstore.store.tables import NOT_IMPORTING, sessions
from memstore.types import (
    Channel,
    Clock,
    CompactionPolicy,
    Conversation,
    ModelCard,
    ModelInvoker,
    SessionNode,
    StreamDone,
    StreamEvent,
    StreamOptions,
    Turn,
    parse_turn,
)
from memstore.usage import NodeUsage

__all__ = ["CompactionDraft", "CompactionResult", "append_branch", "draft_branch", "read_head_path"]

METADATA_KEY = "memstore"
"""The extra key of a summary turn that records what it condensed, under `condensed`."""


@dataclass(frozen=True)
class CompactionResult:
    """What `compact_session` did: the heads before and after, and what was condensed.

    `changed` is False when there was nothing to condense; then nothing was appended, the
    heads are equal and `summary_node_id` is None.
    """

    session_id: str
    previous_head: str | None
    new_head: str | None
    summary_node_id: str | None
    condensed_turns: int
    kept_turns: int
    tokens_before: int
    tokens_after: int
    changed: bool


@dataclass(frozen=True)
class CompactionDraft:
    """The result to report, the nodes of the new branch (empty: nothing to append), and what
    the summarizer's calls cost (recorded against the summary node)."""

    result: CompactionResult
    nodes: tuple[SessionNode, ...]
    usage: NodeUsage | None = None


@dataclass
class _UsageCounter:
    """An invoker that passes its events on and adds up the usage of their `done` events
    (a summary of a long history takes several calls)."""

    invoker: ModelInvoker
    model: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __call__(self, conversation: Conversation, options: StreamOptions) -> Channel:
        return self._counted(self.invoker(conversation, options))

    async def _counted(self, channel: Channel) -> AsyncGenerator[StreamEvent, None]:
        # aclosing: when the reader stops early (at `done`), the channel is closed now, on
        # this event loop, not when it is collected
        async with aclosing(stream_events(channel)) as events:
            async for event in events:
                if isinstance(event, StreamDone):
                    self.calls += 1
                    self.input_tokens += event.usage.input_tokens
                    self.output_tokens += event.usage.output_tokens
                yield event

    def usage(self) -> NodeUsage | None:
        """The calls' usage, or None when no call reported one."""
        if not self.calls:
            return None
        return NodeUsage(
            input_tokens=self.input_tokens, output_tokens=self.output_tokens, model=self.model
        )


def read_head_path(backend: Backend, session_id: str) -> Plan[tuple[str | None, list[SessionNode]]]:
    """The session's head and the nodes from the root to it.

    Raises:
        UnknownSessionError: there is no such session.
    """
    row = (
        yield select(sessions.c.head).where(
            sessions.c.id == plans.lookup_id(session_id), NOT_IMPORTING
        )
    ).first()
    if row is None:
        raise UnknownSessionError(f"no session {session_id!r}")
    if row.head is None:
        return None, []
    path = yield from plans.load_path_nodes(backend, session_id, row.head)
    return row.head, path


def _unchanged(session_id: str, head: str | None, turns: Sequence[Turn]) -> CompactionDraft:
    tokens = estimate_context_tokens(turns)
    result = CompactionResult(
        session_id=session_id,
        previous_head=head,
        new_head=head,
        summary_node_id=None,
        condensed_turns=0,
        kept_turns=len(turns),
        tokens_before=tokens,
        tokens_after=tokens,
        changed=False,
    )
    return CompactionDraft(result, ())


def _only_a_summary(turns: Sequence[Turn], policy: CompactionPolicy | None) -> bool:
    """Whether all there is to condense is the summary an earlier compaction wrote: condensing
    it alone again would write a copy of the branch, no shorter, at the cost of a model call."""
    keep = (policy or CompactionPolicy()).keep_recent
    if not turns or find_cut_point(turns, keep) != 1:
        return False
    marks = turns[0].to_json().get(METADATA_KEY)
    return isinstance(marks, dict) and "condensed" in marks


def _marked(summary: Turn, condensed: dict[str, object]) -> Turn:
    """The summary turn with a record of what it condensed, under `memstore.condensed`."""
    wire = summary.to_json()
    return Turn.model_validate({**wire, METADATA_KEY: {"condensed": condensed}})


async def draft_branch(
    session_id: str,
    head: str | None,
    path: Sequence[SessionNode],
    model_card: ModelCard,
    invoker: ModelInvoker,
    policy: CompactionPolicy | None = None,
    clock: Clock | None = None,
    redact: Redactor | None = None,
) -> CompactionDraft:
    """Condense `path` with `compact` and build the new branch's nodes (no I/O but the model);
    the summary, the model's output, goes through `redact` (the kept turns were stored so).

    Raises:
        CondensationError: the model could not produce a summary.
    """
    check_window(model_card)
    turns = [node.turn for node in path]
    if _only_a_summary(turns, policy):
        return _unchanged(session_id, head, turns)
    counter = _UsageCounter(invoker, model_card.id)
    condensed = await compact(turns, model_card, policy, counter)
    if head is None or condensed is turns:
        return _unchanged(session_id, head, turns)
    summary, *tail = (parse_turn(turn) for turn in condensed)
    if redact is not None:
        summary = apply_redactor(redact, summary)
    cut = len(path) - len(tail)
    before = estimate_context_tokens(turns)
    after = estimate_context_tokens([summary, *tail])
    record: dict[str, object] = {
        "cutNodeId": path[cut].id if tail else None,
        "fromNodeId": head,
        "condensedTurns": cut,
        "tokensBefore": before,
        "tokensAfter": after,
    }
    # The summary is written now; the turns kept keep the times they were first written at.
    times = iter([(clock or system_clock)(), *(node.created_at for node in path[cut:])])
    graph = SessionGraph(session_id, lambda: next(times))
    nodes = tuple(graph.append(turn) for turn in (_marked(summary, record), *tail))
    result = CompactionResult(
        session_id=session_id,
        previous_head=head,
        new_head=nodes[-1].id,
        summary_node_id=nodes[0].id,
        condensed_turns=cut,
        kept_turns=len(tail),
        tokens_before=before,
        tokens_after=after,
        changed=True,
    )
    return CompactionDraft(result, nodes, counter.usage())


def append_branch(
    backend: Backend,
    session_id: str,
    nodes: Sequence[SessionNode],
    expected_head: str | None,
    usage: NodeUsage | None = None,
) -> Plan[str | None]:
    """Append `nodes` (a chain, root first) in one transaction if the head is `expected_head`,
    with `usage` (the summarizer's) against the first, the summary.

    Raises:
        HeadMovedError: another writer moved the head; nothing is appended.
    """
    head = expected_head
    for position, node in enumerate(nodes):
        cost = usage if position == 0 else None
        yield from plans.append_node(backend, session_id, node, head, cost)
        head = node.id
    return head
