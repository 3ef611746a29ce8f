"""Google ADK's shared session-service contract, held against memstore's MemstoreSessionService.

ADK's repository holds every `BaseSessionService` to one set of behaviours: the tests of
`tests/unittests/sessions/test_session_service.py` that take the `session_service` fixture of its
`_conformance.py` backend registry (read at commit 11cc093, 2026). That code is not copied here:
each test below is memstore's own statement of one of those behaviours, named after it, with a
docstring naming the ADK test it corresponds to. The `session_service` fixture
(tests/frameworks/conftest.py) runs each on a SessionStore and an AsyncSessionStore, on SQLite
and PostgreSQL. Where ADK's own services disagree (padded session ids), the behaviour memstore
chose is the one tested, and docs/frameworks.md gives the reason.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

APP = "shop"


def changing(delta: dict[str, Any], **fields: Any) -> Event:
    """An event whose only action is this state change."""
    return Event(
        invocation_id="inv", author="user", actions=EventActions(state_delta=delta), **fields
    )


async def reloaded(service: Any, session: Session) -> Session:
    """The session as the service reads it back now."""
    found: Session | None = await service.get_session(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id
    )
    assert found is not None
    return found


async def new_session(service: Any, user_id: str = "ana", **kwargs: Any) -> Session:
    created: Session = await service.create_session(app_name=APP, user_id=user_id, **kwargs)
    return created


# Sessions: create, read, list, delete


@pytest.mark.asyncio
async def test_a_session_never_created_reads_as_none(session_service: Any) -> None:
    """ADK: test_get_empty_session."""
    assert await session_service.get_session(app_name=APP, user_id="ana", session_id="nope") is None


@pytest.mark.asyncio
async def test_a_created_session_reads_back_equal_until_deleted(session_service: Any) -> None:
    """ADK: test_create_get_session."""
    before = time.time()
    created = await new_session(session_service, state={"cart": "empty"})
    assert (created.app_name, created.user_id, created.state) == (APP, "ana", {"cart": "empty"})
    assert created.id
    assert before - 1 <= created.last_update_time <= time.time()

    assert await reloaded(session_service, created) == created

    await session_service.delete_session(app_name=APP, user_id="ana", session_id=created.id)
    gone = await session_service.get_session(app_name=APP, user_id="ana", session_id=created.id)
    assert gone is None


@pytest.mark.asyncio
async def test_a_users_sessions_are_listed_each_with_its_own_state(session_service: Any) -> None:
    """ADK: test_create_and_list_sessions."""
    names = [f"order-{n}" for n in range(5)]
    for name in names:
        await new_session(session_service, session_id=name, state={"item": f"for {name}"})

    listed = (await session_service.list_sessions(app_name=APP, user_id="ana")).sessions

    assert sorted(session.id for session in listed) == names
    assert all(session.state == {"item": f"for {session.id}"} for session in listed)


@pytest.mark.asyncio
async def test_sessions_are_listed_least_recently_updated_first(session_service: Any) -> None:
    """ADK: test_list_sessions_ordered_by_last_update_time."""
    for name in ("first", "second", "third"):
        await new_session(session_service, session_id=name)
    first = await session_service.get_session(app_name=APP, user_id="ana", session_id="first")
    await asyncio.sleep(0.01)
    await session_service.append_event(first, Event(invocation_id="inv", author="user"))

    listed = (await session_service.list_sessions(app_name=APP, user_id="ana")).sessions

    assert [session.id for session in listed] == ["second", "third", "first"]


@pytest.mark.asyncio
async def test_listing_without_a_user_gives_every_users_sessions(session_service: Any) -> None:
    """ADK: test_list_sessions_all_users."""
    owners = {"ana-1": "ana", "ana-2": "ana", "ben-1": "ben"}
    for name, user in owners.items():
        await new_session(session_service, user, session_id=name, state={"note": name})

    async def listed(user_id: str | None) -> dict[str, dict[str, Any]]:
        found = await session_service.list_sessions(app_name=APP, user_id=user_id)
        return {session.id: session.state for session in found.sessions}

    assert await listed("ana") == {"ana-1": {"note": "ana-1"}, "ana-2": {"note": "ana-2"}}
    assert await listed("ben") == {"ben-1": {"note": "ben-1"}}
    assert await listed(None) == {name: {"note": name} for name in owners}


@pytest.mark.asyncio
async def test_a_session_id_is_read_only_under_its_own_user(session_service: Any) -> None:
    """ADK: test_get_session_respects_user_id."""
    anas = await new_session(session_service, "ana", session_id="shared-name")
    await session_service.append_event(anas, Event(invocation_id="inv", author="user"))
    await new_session(session_service, "ben", session_id="shared-name")

    bens = await session_service.get_session(app_name=APP, user_id="ben", session_id="shared-name")

    assert bens is not None
    assert (bens.user_id, bens.events) == ("ben", [])


@pytest.mark.asyncio
async def test_creating_a_taken_session_id_raises_already_exists(session_service: Any) -> None:
    """ADK: test_create_session_with_existing_id_raises_error."""
    await new_session(session_service, session_id="taken", state={"keep": "first"})

    with pytest.raises(AlreadyExistsError):
        await new_session(session_service, session_id="taken", state={"keep": "second"})

    kept = await session_service.get_session(app_name=APP, user_id="ana", session_id="taken")
    assert kept is not None
    assert kept.state == {"keep": "first"}


@pytest.mark.asyncio
async def test_a_padded_session_id_names_the_trimmed_session_throughout(
    session_service: Any,
) -> None:
    """ADK: test_padded_session_id_reads_and_deletes (ADK's in-memory and SQLite services trim
    the id; its database service keeps it verbatim: memstore trims, see docs/frameworks.md)."""
    created = await new_session(session_service, session_id=" order-7\n", state={"cart": "pen"})
    assert created.id == "order-7"

    found = await session_service.get_session(app_name=APP, user_id="ana", session_id="order-7\t")
    assert found is not None
    assert (found.id, found.state) == ("order-7", {"cart": "pen"})
    with pytest.raises(AlreadyExistsError):
        await new_session(session_service, session_id="order-7")

    await session_service.delete_session(app_name=APP, user_id="ana", session_id="  order-7")
    assert (
        await session_service.get_session(app_name=APP, user_id="ana", session_id="order-7") is None
    )


@pytest.mark.asyncio
async def test_a_blank_session_id_gets_a_generated_one(session_service: Any) -> None:
    """ADK: test_create_session_with_blank_id_generates_one (held by its in-memory service only,
    which memstore follows with the trimming above)."""
    created = await new_session(session_service, session_id="   ")

    assert created.id.strip() == created.id != ""
    assert await reloaded(session_service, created) == created


# State scopes: app, user, session, temp


@pytest.mark.asyncio
async def test_app_state_reaches_every_users_sessions(session_service: Any) -> None:
    """ADK: test_app_state_is_shared_by_all_users_of_app."""
    anas = await new_session(session_service, "ana", session_id="a", state={"app:currency": "EUR"})
    await session_service.append_event(anas, changing({"app:tax": 0.23}))

    bens = await new_session(session_service, "ben", session_id="b")

    assert bens.state == {"app:currency": "EUR", "app:tax": 0.23}
    assert (await reloaded(session_service, anas)).state == {"app:currency": "EUR", "app:tax": 0.23}


@pytest.mark.asyncio
async def test_user_state_reaches_only_that_users_sessions(session_service: Any) -> None:
    """ADK: test_user_state_is_shared_only_by_user_sessions."""
    first = await new_session(session_service, "ana", session_id="a1", state={"user:lang": "pt"})
    await session_service.append_event(first, changing({"user:size": "M"}))

    second = await new_session(session_service, "ana", session_id="a2")
    bens = await new_session(session_service, "ben", session_id="b1")

    assert second.state == {"user:lang": "pt", "user:size": "M"}
    assert bens.state == {}


@pytest.mark.asyncio
async def test_session_state_stays_in_its_session(session_service: Any) -> None:
    """ADK: test_session_state_is_not_shared."""
    first = await new_session(session_service, session_id="a1", state={"step": 1})
    await session_service.append_event(first, changing({"seen": True}))

    again = await reloaded(session_service, first)
    other = await new_session(session_service, session_id="a2")

    assert again.state == {"step": 1, "seen": True}
    assert other.state == {}


@pytest.mark.asyncio
async def test_a_mapping_in_a_delta_replaces_the_stored_mapping(session_service: Any) -> None:
    """ADK: test_dict_valued_state_delta_replaces_stored_value."""
    session = await new_session(
        session_service, state={"address": {"city": "Porto", "zip": "4000"}}
    )
    await session_service.append_event(session, changing({"address": {"city": "Braga"}}))

    assert session.state["address"] == {"city": "Braga"}
    assert (await reloaded(session_service, session)).state["address"] == {"city": "Braga"}


@pytest.mark.asyncio
async def test_a_none_in_a_delta_is_stored_as_none(session_service: Any) -> None:
    """ADK: test_none_valued_state_delta_is_stored_not_dropped."""
    session = await new_session(session_service, state={"coupon": "SALE"})
    await session_service.append_event(session, changing({"coupon": None}))

    for state in (session.state, (await reloaded(session_service, session)).state):
        assert "coupon" in state
        assert state["coupon"] is None


@pytest.mark.asyncio
async def test_a_false_value_stays_false_after_another_key_changes(session_service: Any) -> None:
    """ADK: test_boolean_state_survives_unrelated_state_delta."""
    session = await new_session(session_service, state={"paid": False})
    await session_service.append_event(session, changing({"shipped": True}))

    for state in (session.state, (await reloaded(session_service, session)).state):
        assert state["paid"] is False
        assert state["shipped"] is True


@pytest.mark.asyncio
async def test_a_mapping_in_an_app_delta_replaces_the_stored_mapping(session_service: Any) -> None:
    """ADK: test_app_state_dict_valued_delta_replaces_stored_value."""
    anas = await new_session(
        session_service, "ana", session_id="a", state={"app:hours": {"open": 9, "close": 18}}
    )
    await session_service.append_event(anas, changing({"app:hours": {"open": 10}}))

    bens = await new_session(session_service, "ben", session_id="b")

    assert anas.state["app:hours"] == {"open": 10}
    assert bens.state["app:hours"] == {"open": 10}


@pytest.mark.asyncio
async def test_a_none_in_a_user_delta_is_stored_as_none(session_service: Any) -> None:
    """ADK: test_user_state_none_valued_delta_is_stored_not_dropped."""
    first = await new_session(session_service, session_id="a1", state={"user:theme": "dark"})
    await session_service.append_event(first, changing({"user:theme": None}))

    second = await new_session(session_service, session_id="a2")

    for state in (first.state, second.state):
        assert "user:theme" in state
        assert state["user:theme"] is None
    assert await session_service.get_user_state(app_name=APP, user_id="ana") == {"theme": None}


@pytest.mark.asyncio
async def test_temp_state_is_on_the_session_object_but_never_stored(session_service: Any) -> None:
    """ADK: test_temp_state_is_not_persisted_in_state_or_events."""
    session = await new_session(session_service)
    event = changing({"temp:draft": "x", "step": 2})
    await session_service.append_event(session, event)

    assert session.state["temp:draft"] == "x"
    assert session.state["step"] == 2
    assert event.actions.state_delta == {"step": 2}
    again = await reloaded(session_service, session)
    assert again.state == {"step": 2}
    assert again.events[0].actions.state_delta == {"step": 2}


@pytest.mark.asyncio
async def test_temp_state_is_readable_by_the_next_event_of_the_invocation(
    session_service: Any,
) -> None:
    """ADK: test_temp_state_visible_across_sequential_events."""
    session = await new_session(session_service)
    first = Event(
        invocation_id="inv",
        author="researcher",
        actions=EventActions(state_delta={"temp:notes": "found 3 flights"}),
    )
    await session_service.append_event(session, first)

    assert session.state["temp:notes"] == "found 3 flights"
    assert "temp:notes" not in first.actions.state_delta
    await session_service.append_event(session, Event(invocation_id="inv", author="writer"))
    assert session.state["temp:notes"] == "found 3 flights"


# Events: what is kept, and when


@pytest.mark.asyncio
async def test_an_event_with_bytes_reads_back_equal(session_service: Any) -> None:
    """ADK: test_append_event_bytes."""
    content = types.Content(
        role="user", parts=[types.Part.from_bytes(data=b"\x89PNG\x00\xff", mime_type="image/png")]
    )
    grounding = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"\x00blob\xfe")
    )
    session = await new_session(session_service)
    await session_service.append_event(
        session,
        Event(invocation_id="inv", author="user", content=content, grounding_metadata=grounding),
    )
    assert session.events[0].content == content

    events = (await reloaded(session_service, session)).events
    assert len(events) == 1
    assert (events[0].content, events[0].grounding_metadata) == (content, grounding)


@pytest.mark.asyncio
async def test_an_event_with_every_common_field_reads_back_equal(session_service: Any) -> None:
    """ADK: test_append_event_complete."""
    session = await new_session(session_service)
    event = Event(
        invocation_id="inv",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="one ticket please")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"ticket.pdf": 1}, transfer_to_agent="booker"),
        long_running_tool_ids={"call-9"},
        error_code="E1",
        error_message="none left",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["trains"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=3, candidates_token_count=4, total_token_count=7
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"channel": "web"},
        timestamp=1_700_000_000.123,
        input_transcription=types.Transcription(text="heard", finished=True),
        output_transcription=types.Transcription(text="said", finished=True),
    )
    await session_service.append_event(session, event)

    assert await reloaded(session_service, session) == session


@pytest.mark.asyncio
async def test_requested_tool_confirmations_are_kept(session_service: Any) -> None:
    """ADK: test_append_event_with_requested_tool_confirmations."""
    session = await new_session(session_service)
    asked = ToolConfirmation(hint="refund 20 EUR?", confirmed=False, payload={"order": "o-1"})
    await session_service.append_event(
        session,
        Event(
            invocation_id="inv",
            author="agent",
            actions=EventActions(requested_tool_confirmations={"call-1": asked}),
        ),
    )

    (event,) = (await reloaded(session_service, session)).events
    kept = event.actions.requested_tool_confirmations["call-1"]
    assert (kept.hint, kept.payload, kept.confirmed) == ("refund 20 EUR?", {"order": "o-1"}, False)


@pytest.mark.asyncio
async def test_an_append_sets_the_last_update_time_to_the_events_time(
    session_service: Any,
) -> None:
    """ADK: test_session_last_update_time_updates_on_event."""
    session = await new_session(session_service)
    created_at = session.last_update_time
    await session_service.append_event(
        session, Event(invocation_id="inv", author="user", timestamp=created_at + 10)
    )

    assert session.last_update_time == pytest.approx(created_at + 10, abs=1e-6)
    again = await reloaded(session_service, session)
    assert again.last_update_time == pytest.approx(created_at + 10, abs=1e-6)


@pytest.mark.asyncio
async def test_get_session_config_limits_the_events_read(session_service: Any) -> None:
    """ADK: test_get_session_with_config."""
    start = float(int(time.time()))
    session = await new_session(session_service)
    for n in range(1, 6):
        await session_service.append_event(session, Event(author="user", timestamp=start + n))

    async def times(**config: Any) -> list[float]:
        found = await session_service.get_session(
            app_name=APP, user_id="ana", session_id=session.id, config=GetSessionConfig(**config)
        )
        return [event.timestamp - start for event in found.events]

    assert await times() == [1, 2, 3, 4, 5]
    assert await times(num_recent_events=0) == []
    assert await times(num_recent_events=3) == [3, 4, 5]
    assert await times(after_timestamp=start + 4) == [4, 5]
    assert await times(after_timestamp=start + 50) == []
    assert await times(after_timestamp=start + 4, num_recent_events=3) == [4, 5]


@pytest.mark.asyncio
async def test_a_partial_event_is_neither_stored_nor_added(session_service: Any) -> None:
    """ADK: test_partial_events_are_not_persisted."""
    session = await new_session(session_service)
    await session_service.append_event(session, Event(author="model", partial=True))

    assert session.events == []
    assert (await reloaded(session_service, session)).events == []


@pytest.fixture
def clocks_fall_back() -> Iterator[None]:
    """The process's local time zone set to one that repeats an hour each autumn."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


@pytest.mark.asyncio
async def test_event_times_in_a_repeated_local_hour_read_back_exactly(
    session_service: Any, clocks_fall_back: None
) -> None:
    """ADK: test_get_session_keeps_exact_epoch_across_a_repeated_local_hour."""
    # 2024-11-03 05:30 and 06:15 UTC: 01:30 EDT, then 01:15 EST, the local clock gone back.
    epochs = [1_730_611_800.0, 1_730_614_500.0]
    session = await new_session(session_service)
    for epoch in epochs:
        await session_service.append_event(session, Event(author="user", timestamp=epoch))

    assert [
        event.timestamp for event in (await reloaded(session_service, session)).events
    ] == epochs


# User state, read on its own


@pytest.mark.asyncio
async def test_user_state_of_an_unknown_user_is_empty(session_service: Any) -> None:
    """ADK: test_get_user_state_returns_empty_dict_when_no_state_exists."""
    assert await session_service.get_user_state(app_name=APP, user_id="nobody") == {}


@pytest.mark.asyncio
async def test_user_state_holds_the_user_keys_of_a_delta_without_prefix(
    session_service: Any,
) -> None:
    """ADK: test_get_user_state_returns_state_written_via_append_event."""
    session = await new_session(session_service)
    delta = {"user:address": {"city": "Porto"}, "step": 1, "app:open": True}
    await session_service.append_event(session, changing(delta))

    assert await session_service.get_user_state(app_name=APP, user_id="ana") == {
        "address": {"city": "Porto"}
    }


@pytest.mark.asyncio
async def test_user_state_is_not_seen_by_another_user(session_service: Any) -> None:
    """ADK: test_get_user_state_is_not_visible_across_users."""
    session = await new_session(session_service, "ana")
    await session_service.append_event(session, changing({"user:card": "visa-4242"}))

    assert await session_service.get_user_state(app_name=APP, user_id="ben") == {}


@pytest.mark.asyncio
async def test_user_state_is_not_seen_in_another_app(session_service: Any) -> None:
    """ADK: test_get_user_state_is_not_visible_across_apps."""
    session = await new_session(session_service, "ana")
    await session_service.append_event(session, changing({"user:card": "visa-4242"}))

    assert await session_service.get_user_state(app_name="other-shop", user_id="ana") == {}


@pytest.mark.asyncio
async def test_user_state_is_readable_without_opening_a_session(session_service: Any) -> None:
    """ADK: test_get_user_state_available_before_session_is_created."""
    earlier = await new_session(session_service)
    await session_service.append_event(earlier, changing({"user:visits": {"count": 1}}))

    # A later visit reads the user's state before it creates its own session.
    assert await session_service.get_user_state(app_name=APP, user_id="ana") == {
        "visits": {"count": 1}
    }


@pytest.mark.asyncio
async def test_user_state_gives_the_latest_value_written(session_service: Any) -> None:
    """ADK: test_get_user_state_reflects_latest_write."""
    session = await new_session(session_service)
    for count in (1, 2, 3):
        await session_service.append_event(session, changing({"user:count": count}))

    assert await session_service.get_user_state(app_name=APP, user_id="ana") == {"count": 3}


# Behaviours ADK tests on its database services only (outside the shared contract): its
# in-memory service has no stale-writer check and keeps state values as given.


@pytest.mark.asyncio
async def test_of_two_copies_of_a_session_appending_at_once_exactly_one_wins(
    session_service: Any,
) -> None:
    """ADK: test_append_event_concurrent_stale_sessions_reject_stale_writer (with the message
    test_append_event_to_stale_session matches, and a ValueError, as
    test_sqlite_append_event_uses_typed_stale_session_error asks)."""
    session = await new_session(session_service)
    for round_ in range(4):
        latest = await reloaded(session_service, session)
        copies = [latest.model_copy(deep=True) for _ in range(2)]
        results = await asyncio.gather(
            *(
                session_service.append_event(copy, changing({f"r{round_}": n}))
                for n, copy in enumerate(copies)
            ),
            return_exceptions=True,
        )
        errors = [result for result in results if isinstance(result, BaseException)]
        assert len(errors) == 1
        assert isinstance(errors[0], StaleSessionError)
        assert isinstance(errors[0], ValueError)
        assert "modified in storage" in str(errors[0])

    final = await reloaded(session_service, session)
    assert len(final.events) == 4
    assert sorted(final.state) == ["r0", "r1", "r2", "r3"]


@pytest.mark.asyncio
async def test_a_value_json_cannot_hold_is_stored_as_its_text(session_service: Any) -> None:
    """ADK: test_append_event_with_non_serializable_state_delta."""
    session = await new_session(session_service)
    await session_service.append_event(session, changing({"hook": lambda: 1, "total": 12}))

    again = await reloaded(session_service, session)
    assert len(again.events) == 1
    assert again.state["total"] == 12
    assert isinstance(again.state["hook"], str)


@pytest.mark.asyncio
async def test_events_of_one_timestamp_read_back_in_append_order(session_service: Any) -> None:
    """ADK: test_get_session_orders_tied_timestamps_by_id, where ADK's services disagree: its
    database service orders a tie by event id, the installed 2.13's SQLite service by append
    order, as memstore does (its in-memory service keeps append order without sorting by time);
    see docs/frameworks.md."""
    session = await new_session(session_service)
    await session_service.append_event(session, Event(author="user", id="event-b", timestamp=99.0))
    for event_id in ("event-z", "event-a", "event-m"):
        await session_service.append_event(
            session, Event(author="user", id=event_id, timestamp=100.0)
        )

    events = (await reloaded(session_service, session)).events
    assert [event.id for event in events] == ["event-b", "event-z", "event-a", "event-m"]
    recent = await session_service.get_session(
        app_name=APP,
        user_id="ana",
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=2),
    )
    assert [event.id for event in recent.events] == ["event-a", "event-m"]


# Two behaviours the registry notes its Redis service lacks, with no contract test of ADK's yet


@pytest.mark.asyncio
async def test_listing_for_an_empty_user_id_lists_only_that_users_sessions(
    session_service: Any,
) -> None:
    """ADK: none; _conformance.py notes that its Redis service lists every user's sessions for
    an empty user id (a truthiness check), which no contract test catches yet."""
    await new_session(session_service, "ana", session_id="a1")
    await new_session(session_service, "", session_id="anonymous")

    listed = await session_service.list_sessions(app_name=APP, user_id="")

    assert [(session.user_id, session.id) for session in listed.sessions] == [("", "anonymous")]


@pytest.mark.asyncio
async def test_appending_to_a_session_never_stored_raises_not_found(session_service: Any) -> None:
    """ADK: none; _conformance.py notes that its Redis service creates a session it never stored
    when an event is appended to it, instead of raising."""
    never_stored = Session(id="ghost", app_name=APP, user_id="ana")

    with pytest.raises(SessionNotFoundError):
        await session_service.append_event(never_stored, Event(invocation_id="inv", author="user"))

    assert (
        await session_service.get_session(app_name=APP, user_id="ana", session_id="ghost") is None
    )
    assert (await session_service.list_sessions(app_name=APP, user_id="ana")).sessions == []
