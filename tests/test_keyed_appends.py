"""`append_keyed`: turns whose key the session holds are skipped, by index, inside the writing
transaction; `revise` sets the session's title, tags and metadata in the same transaction."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from memstore import InvalidArgumentError, JsonlError, SessionStore, Turn, parse_turn


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


def test_keys_travel_through_export_and_import_so_an_import_still_deduplicates(
    store: SessionStore, tmp_path: Path
) -> None:
    """A node's key is a line of its own in the JSONL export, after the node; imported (under
    any session id), the keys are held again, and the file exports back byte for byte."""
    first = store.append_keyed("s", [_turn("a"), _turn("b")], ["a", "b"])
    store.append("s", _turn("unkeyed"))
    exported = tmp_path / "s.jsonl"
    store.export_jsonl("s", exported)
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    keyed = [(record["node"], record["key"]) for record in records if record["type"] == "key"]
    assert keyed == [(first[0].id, "a"), (first[1].id, "b")]
    store.import_jsonl(exported, session_id="copy")
    again = tmp_path / "copy.jsonl"
    store.export_jsonl("copy", again)
    assert again.read_bytes() == exported.read_bytes()
    assert store.append_keyed("copy", [_turn("a"), _turn("c")], ["a", "c"])[0].turn == parse_turn(
        _turn("c")
    )
    assert _texts(store, "copy") == ["a", "b", "unkeyed", "c"]


def test_a_key_line_naming_no_earlier_node_is_refused(store: SessionStore, tmp_path: Path) -> None:
    store.append_keyed("s", [_turn("a")], ["a"])
    exported = tmp_path / "s.jsonl"
    store.export_jsonl("s", exported)
    stray = json.dumps({"type": "key", "node": "f" * 8, "key": "x"}, separators=(",", ":"))
    exported.write_text(exported.read_text(encoding="utf-8") + stray + "\n", encoding="utf-8")
    with pytest.raises(JsonlError, match="key names node 'ffffffff', which no earlier line"):
        store.import_jsonl(exported, session_id="copy")
    assert store.load_path("copy") == []
