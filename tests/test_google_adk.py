"""The Google ADK session service: every event field kept, the state scopes, listing, the
GetSessionConfig filters, stale session objects refused, atomic and concurrent appends, on
SessionStore and AsyncSessionStore, SQLite and PostgreSQL. (ADK's own tests run in
tests/frameworks/test_adk_session_service.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types

from memstore.integrations._history import AnyStore
from memstore.integrations.google_adk import MemstoreSessionService, memstore_session_id
from tests.framework_stores import Body, maybe, runner_on_migrated
from tests.templates import Templates


@pytest.fixture(params=["sync", "async"])
def with_store(
    request: pytest.FixtureRequest, database_url: str, migrated_templates: Templates
) -> Callable[[Body], None]:
    """Runs an async test body with a SessionStore or an AsyncSessionStore on this database."""
    return runner_on_migrated(request.param, database_url, migrated_templates)


def full_event(timestamp: float = 1_800_000_000.25) -> Event:
    """An event with every field ADK defines set to a value other than its default."""
    return Event.model_validate(
        {
            "id": "e-1",
            "invocation_id": "inv-1",
            "author": "planner",
            "timestamp": timestamp,
            "branch": "root.planner",
            "isolation_scope": "scope-1",
            "long_running_tool_ids": {"call-1"},
            "output": {"answer": 42},
            "node_info": {
                "path": "root/planner",
                "output_for": ["root"],
                "message_as_output": True,
            },
            "model_version": "gemini-test",
            "content": types.Content(
                role="model",
                parts=[
                    types.Part(text="Let me look.", thought=True, thought_signature=b"sig\x00"),
                    types.Part(text="The answer is 42."),
                    types.Part(
                        function_call=types.FunctionCall(id="call-1", name="add", args={"a": 40})
                    ),
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="call-1", name="add", response={"sum": 42}
                        )
                    ),
                    types.Part.from_bytes(data=b"\x89PNG\x00\xff", mime_type="image/png"),
                ],
            ),
            "grounding_metadata": types.GroundingMetadata(
                web_search_queries=["q"],
                search_entry_point=types.SearchEntryPoint(sdk_blob=b"blob"),
            ),
            "partial": False,
            "turn_complete": True,
            "turn_complete_reason": types.TurnCompleteReason.MALFORMED_FUNCTION_CALL,
            "interaction_status": types.InteractionStatus.IN_PROGRESS,
            "finish_reason": types.FinishReason.STOP,
            "error_code": "E1",
            "error_message": "an error",
            "interrupted": True,
            "custom_metadata": {"k": [1, {"n": None}]},
            "usage_metadata": types.GenerateContentResponseUsageMetadata(
                prompt_token_count=3, candidates_token_count=4, total_token_count=7
            ),
            "live_session_resumption_update": {"new_handle": "h", "resumable": True},
            "live_session_id": "live-1",
            "go_away": {"time_left": "5s"},
            "voice_activity": {"voice_activity_type": "ACTIVITY_START"},
            "input_transcription": types.Transcription(text="in", finished=True),
            "output_transcription": types.Transcription(text="out", finished=False),
            "avg_logprobs": -0.5,
            "cache_creation_token_count": 12,
            "logprobs_result": {"log_probability_sum": -1.5},
            "cache_metadata": {
                "cache_name": "c",
                "expire_time": 1_900_000_000.0,
                "fingerprint": "f",
                "invocations_used": 2,
                "contents_count": 3,
            },
            "citation_metadata": types.CitationMetadata(citations=[types.Citation(uri="u")]),
            "interaction_id": "int-1",
            "environment_id": "env-1",
            "actions": {
                "skip_summarization": True,
                "state_delta": {"s": 1, "app:a": 2, "user:u": 3},
                "artifact_delta": {"file.txt": 2},
                "transfer_to_agent": "helper",
                "transfer_reason": "it knows",
                "escalate": True,
                "requested_auth_configs": {
                    "call-1": {
                        "auth_scheme": {
                            "type": "http",
                            "scheme": "bearer",
                            "bearerFormat": "JWT",
                            "description": "a token",
                        },
                        "credential_key": "k",
                    }
                },
                "requested_tool_confirmations": {"call-1": {"hint": "ok?", "confirmed": True}},
                "compaction": {
                    "start_timestamp": 1.0,
                    "end_timestamp": 2.0,
                    "compacted_content": {"role": "model", "parts": [{"text": "summary"}]},
                },
                "end_of_agent": True,
                "agent_state": {"step": 2},
                "rewind_before_invocation_id": "inv-0",
                "route": ["a", 1, True],
                "render_ui_widgets": [{"id": "w", "provider": "p", "payload": {"x": 1}}],
                "set_model_response": {"done": True},
            },
        }
    )


def test_the_full_event_sets_every_field() -> None:
    """The round trip below is worth only what the event sets: every field, not a default."""
    event = full_event()
    assert set(event.model_fields_set) == set(Event.model_fields)
    assert set(event.actions.model_fields_set) == set(type(event.actions).model_fields)


def test_every_event_field_survives_a_round_trip(with_store: Callable[[Body], None]) -> None:
    async def body(store: AnyStore) -> None:
        service = MemstoreSessionService(store)
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        event = full_event()
        await service.append_event(session, event.model_copy(deep=True))
        got = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        # Equal as JSON; as models, equal to what ADK's own JSON round trip gives (its
        # DatabaseSessionService's): `requested_auth_configs` is typed Any and comes back as
        # the auth scheme's JSON, not the fastapi model it was built from.
        assert got.events[0].model_dump(mode="json") == event.model_dump(mode="json")
        assert got.events == [Event.model_validate(event.model_dump(mode="json"))]
        assert got.model_copy(update={"events": []}) == session.model_copy(update={"events": []})
        assert got.state == {"s": 1, "app:a": 2, "user:u": 3}
        assert got.last_update_time == event.timestamp
        # The parts are blocks too: searchable, in memstore's views.
        (turn,) = await maybe(store.load_path(memstore_session_id("app", "u", "s")))
        assert [block.kind for block in turn.blocks] == [
            "thinking",
            "text",
            "tool_call",
            "tool_result",
        ]

    with_store(body)


def _event(timestamp: float, delta: dict[str, Any] | None = None, text: str = "hi") -> Event:
    return Event(
        invocation_id="inv",
        author="user",
        timestamp=timestamp,
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        actions={"state_delta": delta or {}},
    )


def test_state_scopes_listing_order_and_user_state(with_store: Callable[[Body], None]) -> None:
    async def body(store: AnyStore) -> None:
        service = MemstoreSessionService(store)
        one = await service.create_session(
            app_name="app", user_id="u1", session_id="b", state={"app:shared": 1, "mine": "b"}
        )
        two = await service.create_session(app_name="app", user_id="u1", session_id="a")
        other = await service.create_session(app_name="app", user_id="u2", session_id="c")
        await service.create_session(app_name="elsewhere", user_id="u1", session_id="z")
        await service.append_event(two, _event(100.0, {"user:lang": "fr", "temp:t": 1}))
        await service.append_event(one, _event(200.0, {"mine": "b2", "app:shared": 2}))
        await service.append_event(other, _event(50.0))
        assert one.state == {"mine": "b2", "app:shared": 2}  # its own deltas, as ADK's services
        listed = (await service.list_sessions(app_name="app", user_id="u1")).sessions
        assert [(s.id, s.last_update_time) for s in listed] == [("a", 100.0), ("b", 200.0)]
        assert listed[1].state == {"mine": "b2", "app:shared": 2, "user:lang": "fr"}
        assert all(not s.events for s in listed)
        everyone = (await service.list_sessions(app_name="app")).sessions
        assert [s.id for s in everyone] == ["c", "a", "b"]
        assert everyone[0].state == {"app:shared": 2}
        assert await service.get_user_state(app_name="app", user_id="u1") == {"lang": "fr"}
        assert await service.get_user_state(app_name="app", user_id="nobody") == {}
        got = await service.get_session(app_name="app", user_id="u1", session_id="a")
        assert got is not None
        assert "temp:t" not in got.state
        assert got.events[0].actions.state_delta == {"user:lang": "fr"}
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name="app", user_id="u1", session_id="a")
        await service.delete_session(app_name="app", user_id="u1", session_id="a")
        assert await service.get_session(app_name="app", user_id="u1", session_id="a") is None
        assert await service.get_user_state(app_name="app", user_id="u1") == {"lang": "fr"}

    with_store(body)


def test_get_session_config_limits_events(with_store: Callable[[Body], None]) -> None:
    async def body(store: AnyStore) -> None:
        service = MemstoreSessionService(store)
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        for second in range(1, 8):
            await service.append_event(session, _event(float(second), {"n": second}))

        async def timestamps(**config: Any) -> list[float]:
            got = await service.get_session(
                app_name="app", user_id="u", session_id="s", config=GetSessionConfig(**config)
            )
            assert got is not None
            assert got.state == {"n": 7}
            return [event.timestamp for event in got.events]

        assert await timestamps() == [1, 2, 3, 4, 5, 6, 7]
        assert await timestamps(num_recent_events=3) == [5, 6, 7]
        assert await timestamps(num_recent_events=0) == []
        assert await timestamps(after_timestamp=6.0) == [6, 7]
        assert await timestamps(after_timestamp=2.0, num_recent_events=2) == [6, 7]
        assert await timestamps(after_timestamp=99.0) == []

    with_store(body)


def test_events_load_in_timestamp_order_as_adks_stores_return_them(
    with_store: Callable[[Body], None],
) -> None:
    """ADK's database and SQLite services order a session's events by timestamp (a tie in
    append order); events appended out of that order load in it, within any window read."""

    async def body(store: AnyStore) -> None:
        service = MemstoreSessionService(store)
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        for second, text in [(3.0, "c"), (1.0, "a"), (2.0, "b1"), (2.0, "b2"), (4.0, "d")]:
            await service.append_event(session, _event(second, text=text))

        async def texts(**config: Any) -> list[str]:
            got = await service.get_session(
                app_name="app", user_id="u", session_id="s", config=GetSessionConfig(**config)
            )
            assert got is not None
            return [_text_of(event) for event in got.events]

        assert await texts() == ["a", "b1", "b2", "c", "d"]
        assert await texts(after_timestamp=2.0) == ["b1", "b2", "c", "d"]
        assert await texts(num_recent_events=3) == ["b1", "b2", "d"]  # the newest 3 appended

    with_store(body)


def _text_of(event: Event) -> str:
    assert event.content is not None
    assert event.content.parts
    return event.content.parts[0].text or ""


def test_a_stale_session_object_is_refused_and_writes_nothing(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        service = MemstoreSessionService(store)
        created = await service.create_session(app_name="app", user_id="u", session_id="s")
        again = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert again is not None
        await service.append_event(created, _event(10.0, {"by": "first"}))
        with pytest.raises(StaleSessionError):
            await service.append_event(
                again, _event(11.0, {"by": "second", "user:x": 1, "app:y": 2})
            )
        # Nothing of it was written: the app's and the user's state come before the session's
        # in the transaction, and were rolled back with it.
        got = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        assert got.state == {"by": "first"}
        assert await service.get_user_state(app_name="app", user_id="u") == {}
        assert len(got.events) == 1
        # The object that wrote last goes on, and one read since.
        await service.append_event(created, _event(12.0))
        fresh = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert fresh is not None
        await service.append_event(fresh, _event(13.0))
        # A session object built by hand (no marker) is compared by its last event.
        manual = Session(
            id="s", app_name="app", user_id="u", events=[], last_update_time=0.0, state={}
        )
        with pytest.raises(StaleSessionError):
            await service.append_event(manual, _event(14.0))
        missing = Session(id="nope", app_name="app", user_id="u")
        with pytest.raises(SessionNotFoundError):
            await service.append_event(missing, _event(15.0))
        await service.delete_session(app_name="app", user_id="u", session_id="s")
        with pytest.raises(SessionNotFoundError):
            await service.append_event(created, _event(16.0))

    with_store(body)


def test_concurrent_appends_of_one_user_merge_their_state(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        service = MemstoreSessionService(store)
        sessions = [
            await service.create_session(app_name="app", user_id="u", session_id=f"s{n}")
            for n in range(6)
        ]
        await asyncio.gather(
            *(
                service.append_event(session, _event(float(n), {f"user:k{n}": n, f"app:k{n}": n}))
                for n, session in enumerate(sessions)
            )
        )
        user = await service.get_user_state(app_name="app", user_id="u")
        assert user == {f"k{n}": n for n in range(6)}
        got = await service.get_session(app_name="app", user_id="u", session_id="s0")
        assert got is not None
        assert {key for key in got.state if key.startswith("app:")} == {
            f"app:k{n}" for n in range(6)
        }

    with_store(body)


def test_long_ids_hash_and_parts_cannot_collide() -> None:
    assert memstore_session_id("a~b", "c") != memstore_session_id("a", "b~c")
    assert memstore_session_id("a", "b", "c") == "adk~a~b~c"
    long = memstore_session_id("app", "u" * 300, "s")
    assert len(long) <= 255
    assert long != memstore_session_id("app", "u" * 301, "s")
