"""`append_keyed`: turns whose key the session holds are skipped, by index, inside the writing
transaction; `revise` sets the session's title, tags and metadata in the same transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from memstore import InvalidArgumentError, SessionStore, Turn


def _turn(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def _texts(store: SessionStore, session_id: str) -> list[str]:
    return [turn.to_json()["blocks"][0]["text"] for turn in store.load_path(session_id)]


def test_held_keys_are_skipped_and_none_always_appends(store: SessionStore) -> None:
    first = store.append_keyed("s", [_turn("a"), _turn("b"), _turn("a again")], ["a", "b", "a"])
    assert len(first) == 2  # a key repeated in the call keeps its first turn
    again = store.append_keyed("s", [_turn("b"), _turn("c"), _turn("free")], ["b", "c", None])
    assert again[0].parent == first[-1].id
    assert store.append_keyed("s", [_turn("a")], ["a"]) == []
    assert store.append_keyed("s", [_turn("free")], [None]) != []
    assert _texts(store, "s") == ["a", "b", "c", "free", "free"]
    assert store.append_keyed("other", [_turn("a")], ["a"]) != []  # keys are per session
    assert store.delete_session("s")
    assert len(store.append_keyed("s", [_turn("a")], ["a"])) == 1  # deleted with the session


def test_revise_runs_in_the_append_with_the_turns_appended(store: SessionStore) -> None:
    seen: list[tuple[dict[str, Any], int]] = []

    def revise(metadata: Mapping[str, Any], added: list[Turn]) -> dict[str, Any]:
        seen.append((dict(metadata), len(added)))
        return {"metadata": {"count": metadata.get("count", 0) + len(added)}, "title": "t"}

    store.append_keyed("s", [_turn("a"), _turn("b")], ["a", "b"], revise=revise)
    store.append_keyed("s", [_turn("b")], ["b"], revise=revise)  # nothing new: not called
    store.append_keyed("s", [_turn("c")], ["c"], revise=lambda meta, added: {"metadata": {**meta}})
    info = store.session_info("s")
    assert (info.title, dict(info.metadata)) == ("t", {"count": 2})
    assert seen == [({}, 2)]


def test_bad_keys_are_refused_naming_the_session_and_nothing_is_written(
    store: SessionStore,
) -> None:
    with pytest.raises(InvalidArgumentError, match="a list of turns and a key for each"):
        store.append_keyed("s", [_turn("a")], ["a", "b"])
    with pytest.raises(InvalidArgumentError, match=r"session 's': a turn's key is a string"):
        store.append_keyed("s", [_turn("a"), _turn("b")], ["a", "k" * 256])
    with pytest.raises(InvalidArgumentError, match="a turn's key"):
        store.append_keyed("s", [_turn("a")], [""])
    assert store.load_path("s") == []
