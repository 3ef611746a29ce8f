from __future__ import annotations

import logging
import threading

import pytest

from memstore import (
    FaultedEvent,
    RunError,
    RunEvent,
    RunLedger,
    RunSnapshot,
    SettledEvent,
    SnapshotAccumulator,
    SnapshotEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolFinishedEvent,
    ToolOutcome,
    ToolStartedEvent,
)
from memstore.ledger import Unsubscribe


def snap(phase: str = "idle", run_id: str = "r1") -> RunSnapshot:
    return RunSnapshot.model_validate(
        {"runId": run_id, "sessionId": "s", "phase": phase, "model": "m"}
    )


DELTA = TextDeltaEvent(delta="x")


def test_publish_reaches_every_handler_in_registration_order() -> None:
    ledger = RunLedger()
    seen: list[str] = []
    ledger.subscribe(lambda e: seen.append("a"))
    ledger.subscribe(lambda e: seen.append("b"))
    ledger.subscribe(lambda e: seen.append("c"))
    ledger.publish(DELTA)
    assert seen == ["a", "b", "c"]
    assert ledger.size == 3


def test_duplicate_subscription_is_a_noop_with_a_working_disposer() -> None:
    ledger = RunLedger()
    seen: list[RunEvent] = []
    first = ledger.subscribe(seen.append)
    second = ledger.subscribe(seen.append)
    ledger.publish(DELTA)
    assert seen == [DELTA]
    assert ledger.size == 1
    second()
    assert ledger.size == 0
    first()  # idempotent
    assert ledger.size == 0


def test_a_disposer_called_twice_does_not_remove_a_later_subscription() -> None:
    ledger = RunLedger()
    seen: list[RunEvent] = []
    dispose = ledger.subscribe(seen.append)
    dispose()
    ledger.subscribe(seen.append)
    dispose()
    assert ledger.size == 1


def test_subscribing_and_unsubscribing_inside_a_handler_takes_effect_next_publish() -> None:
    ledger = RunLedger()
    seen: list[str] = []
    disposers: dict[str, Unsubscribe] = {}

    def late(event: RunEvent) -> None:
        seen.append("late")

    def first(event: RunEvent) -> None:
        seen.append("first")
        ledger.subscribe(late)
        disposers["second"]()

    ledger.subscribe(first)
    disposers["second"] = ledger.subscribe(lambda e: seen.append("second"))
    ledger.publish(DELTA)
    assert seen == ["first", "second"]  # snapshot of the set: second still ran, late did not
    seen.clear()
    ledger.publish(DELTA)
    assert seen == ["first", "late"]


def test_a_throwing_handler_is_isolated_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    ledger = RunLedger()
    seen: list[str] = []

    def broken(event: RunEvent) -> None:
        raise RuntimeError("handler bug")

    ledger.subscribe(lambda e: seen.append("before"))
    ledger.subscribe(broken)
    ledger.subscribe(lambda e: seen.append("after"))
    with caplog.at_level(logging.ERROR, logger="memstore.ledger"):
        ledger.publish(DELTA)
    assert seen == ["before", "after"]
    (record,) = caplog.records
    assert "text_delta" in record.getMessage()
    assert record.exc_info is not None
    assert "handler bug" in str(record.exc_info[1])


def test_a_handler_failing_on_an_event_that_is_no_model_leaves_its_siblings_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A plain dict (as stream events may be) made the failure's log line raise AttributeError
    (`event.kind`) out of `publish`, and the handlers after it never ran."""
    ledger = RunLedger()
    seen: list[object] = []

    def broken(event: RunEvent) -> None:
        raise RuntimeError("handler bug")

    ledger.subscribe(broken)
    ledger.subscribe(seen.append)
    event = {"kind": "text_delta", "delta": "x"}
    with caplog.at_level(logging.ERROR, logger="memstore.ledger"):
        ledger.publish(event)  # type: ignore[arg-type]
    assert seen == [event]
    (record,) = caplog.records
    assert "text_delta" in record.getMessage()


def test_clear_removes_every_handler() -> None:
    ledger = RunLedger()
    seen: list[RunEvent] = []
    ledger.subscribe(seen.append)
    ledger.subscribe(lambda e: None)
    ledger.clear()
    ledger.publish(DELTA)
    assert (seen, ledger.size) == ([], 0)


def test_concurrent_publish_and_subscribe_lose_nothing() -> None:
    ledger = RunLedger()
    counts = [0] * 8
    lock = threading.Lock()

    def counter(i: int) -> None:
        def handle(event: RunEvent) -> None:
            with lock:
                counts[i] += 1

        ledger.subscribe(handle)

    for i in range(8):
        counter(i)
    churn_stop = threading.Event()

    def churn() -> None:
        while not churn_stop.is_set():
            ledger.subscribe(lambda e: None)()

    churner = threading.Thread(target=churn)
    churner.start()

    def publish_many() -> None:
        for _ in range(500):
            ledger.publish(DELTA)

    publishers = [threading.Thread(target=publish_many) for _ in range(4)]
    for thread in publishers:
        thread.start()
    for thread in publishers:
        thread.join()
    churn_stop.set()
    churner.join()
    assert counts == [2000] * 8
    assert ledger.size == 8


def test_accumulator_keeps_the_latest_snapshot_from_carrying_events() -> None:
    acc = SnapshotAccumulator()
    assert (acc.snapshot(), acc.has_snapshot) == (None, False)
    acc.observe(SnapshotEvent(snapshot=snap("invoking")))
    assert acc.snapshot() == snap("invoking")
    for ignored in (
        DELTA,
        ThinkingDeltaEvent(delta="t"),
        ToolStartedEvent(id="t", name="ls"),
        ToolFinishedEvent(id="t", name="ls", outcome=ToolOutcome(output=1)),
    ):
        acc.observe(ignored)
    assert acc.snapshot() == snap("invoking")
    acc.observe(SettledEvent(snapshot=snap("settled")))
    assert acc.snapshot() == snap("settled")
    acc.observe(FaultedEvent(error=RunError(message="x"), snapshot=snap("faulted")))
    assert acc.snapshot() == snap("faulted")
    acc.reset()
    assert (acc.snapshot(), acc.has_snapshot) == (None, False)


def test_accumulator_attaches_to_a_ledger_and_detaches() -> None:
    ledger = RunLedger()
    acc = SnapshotAccumulator()
    detach = acc.attach(ledger)
    assert acc.attach(ledger) is not None
    assert ledger.size == 1
    ledger.publish(SnapshotEvent(snapshot=snap(run_id="a")))
    assert acc.has_snapshot
    detach()
    ledger.publish(SnapshotEvent(snapshot=snap(run_id="b")))
    snapshot = acc.snapshot()
    assert snapshot is not None
    assert snapshot.run_id == "a"
