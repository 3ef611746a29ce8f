"""The run event ledger: a synchronous fan-out bus and an accumulator of the latest snapshot."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from memstore.types import FaultedEvent, RunEvent, RunSnapshot, SettledEvent, SnapshotEvent

__all__ = ["RunEventHandler", "RunLedger", "SnapshotAccumulator", "Unsubscribe"]

logger = logging.getLogger(__name__)

RunEventHandler = Callable[[RunEvent], None]
Unsubscribe = Callable[[], None]


class RunLedger:
    """Delivers each published event to every subscribed handler, in subscription order.

    Delivery runs over a copy of the handler list, so a handler may subscribe or unsubscribe
    (itself or others) while an event is delivered; the change takes effect on the next publish.
    A handler that raises is logged and skipped; its siblings still receive the event. The
    ledger is safe to use from several threads.
    """

    def __init__(self) -> None:
        self._handlers: list[RunEventHandler] = []
        self._lock = threading.Lock()

    def subscribe(self, handler: RunEventHandler) -> Unsubscribe:
        """Register `handler`; returns a disposer that removes it (calling it twice is harmless).

        Subscribing a handler that is already registered is a no-op that still returns a
        working disposer.
        """
        with self._lock:
            if handler not in self._handlers:
                self._handlers.append(handler)
        disposed = False

        def unsubscribe() -> None:
            nonlocal disposed
            with self._lock:
                if not disposed and handler in self._handlers:
                    self._handlers.remove(handler)
                disposed = True

        return unsubscribe

    def publish(self, event: RunEvent) -> None:
        """Deliver `event` to the handlers registered now, in registration order."""
        with self._lock:
            handlers = tuple(self._handlers)
        for handler in handlers:
            try:
                handler(event)
            except Exception:
                kind = event.get("kind") if isinstance(event, dict) else event.kind
                logger.exception("run ledger handler %r failed on a %r event", handler, kind)

    def clear(self) -> None:
        """Remove every handler."""
        with self._lock:
            self._handlers.clear()

    @property
    def size(self) -> int:
        """How many handlers are registered."""
        with self._lock:
            return len(self._handlers)


class SnapshotAccumulator:
    """Keeps the most recent RunSnapshot seen in `snapshot`, `settled` and `faulted` events."""

    def __init__(self) -> None:
        self._snapshot: RunSnapshot | None = None

    def __repr__(self) -> str:
        # What the run is and how far it got: the snapshot's turns can run to megabytes.
        shot = self._snapshot
        if shot is None:
            return "SnapshotAccumulator(snapshot=None)"
        failed = f", error={shot.error.message!r}" if shot.error is not None else ""
        return (
            f"SnapshotAccumulator(run_id={shot.run_id!r}, session_id={shot.session_id!r}, "
            f"phase={shot.phase!r}, model={shot.model!r}, messages={len(shot.messages)}, "
            f"pending={len(shot.pending)}{failed})"
        )

    def observe(self, event: RunEvent) -> None:
        """Fold one event in; events that carry no snapshot are ignored."""
        if isinstance(event, SnapshotEvent | SettledEvent | FaultedEvent):
            self._snapshot = event.snapshot

    def snapshot(self) -> RunSnapshot | None:
        """The latest snapshot, or None before the first one."""
        return self._snapshot

    @property
    def has_snapshot(self) -> bool:
        """Whether a snapshot has been observed since creation or the last reset."""
        return self._snapshot is not None

    def reset(self) -> None:
        """Forget the tracked snapshot."""
        self._snapshot = None

    def attach(self, ledger: RunLedger) -> Unsubscribe:
        """Subscribe to `ledger`; returns the ledger's disposer."""
        return ledger.subscribe(self.observe)
