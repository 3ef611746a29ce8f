"""Imported sessions condense as native ones do; what that means for exporting and importing
their files again."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore import invokers
from memstore.errors import JsonlError
from memstore.store import SessionStore
from memstore.types import CompactionPolicy, ModelCard

from .foreign_lines import pi_lines, write_lines


def test_an_imported_session_condenses_and_its_file_then_stops_importing(
    store: SessionStore, tmp_path: Path
) -> None:
    path = write_lines(tmp_path / "p.jsonl", pi_lines("p", 10))
    store.import_pi(path)
    card = ModelCard(id="extractive", context_window=400)
    result = store.compact_session(
        "p", card, invokers.extractive(), CompactionPolicy(keep_recent=4)
    )
    assert result.changed
    assert result.summary_node_id is not None
    assert result.condensed_turns == 36
    summary = store.load_session("p").get(result.summary_node_id)
    assert summary is not None
    assert "condensed" in summary.turn.to_json()["memstore"]
    assert len(store.load_path("p")) == 1 + 4
    # The agent's file grew meanwhile: memstore's own nodes now follow its lines in the session,
    # so the file's next lines no longer extend what was imported.
    write_lines(path, pi_lines("p", 11))
    with pytest.raises(JsonlError, match="differs from what was imported"):
        store.import_pi(path)
