"""A session's created and updated times come from its turns, not from when it was imported or
compacted (issue 18 item 11); on SQLite and PostgreSQL, sync and async."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore.store import SessionStore

from .conftest import LEGACY, LEGACY_FILES
from .legacy import read_legacy_session


def node_times(path: Path) -> list[int]:
    return [node.created_at for node in read_legacy_session(path).all()]


def test_an_imported_session_is_as_old_as_its_turns(store: SessionStore) -> None:
    store.import_jsonl(LEGACY)
    for path in LEGACY_FILES:
        info = store.session_info(path.stem)
        times = node_times(path)
        if times:
            assert (info.created_at, info.updated_at) == (min(times), max(times)), path.name
    listed = [info.id for info in store.sessions()]
    newest_turn = {path.stem: max(node_times(path), default=0) for path in LEGACY_FILES}
    assert listed == sorted(newest_turn, key=lambda sid: (-newest_turn[sid], sid))


def test_a_grown_file_moves_updated_to_its_newest_turn(store: SessionStore, tmp_path: Path) -> None:
    source = LEGACY / "branching.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    grown = tmp_path / "branching.jsonl"
    grown.write_bytes(b"".join(lines[:10]))
    store.import_jsonl(grown)
    first = store.session_info("branching")
    grown.write_bytes(b"".join(lines))
    store.import_jsonl(grown)
    info = store.session_info("branching")
    times = node_times(source)
    assert first.created_at == info.created_at == min(times)
    assert first.updated_at < info.updated_at == max(times)


def _shared_pi_sample() -> Path | None:
    repo = Path(__file__).resolve().parents[1]
    for base in (repo.parent, repo.parent.parent):
        sample = base / "shared" / "fixtures" / "foreign" / "pi" / "large-session.jsonl"
        if sample.is_file():
            return sample
    return None


def test_a_session_imported_from_pi_is_as_old_as_its_turns(store: SessionStore) -> None:
    sample = _shared_pi_sample()
    if sample is None:
        pytest.skip("../shared/fixtures/foreign is absent")
    (item,) = store.import_pi(sample).files
    times = [node.created_at for node in store.load_session(item.session_id).all()]
    info = store.session_info(item.session_id)
    assert (info.created_at, info.updated_at) == (min(times), max(times))
