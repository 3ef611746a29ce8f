"""Short node ids: any unique prefix names a node, as git takes them (issue 18 item 10)."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from memstore import AmbiguousNodeError, UnknownNodeError
from memstore.store import SessionStore

from .conftest import LEGACY


@pytest.fixture
def ids(store: SessionStore) -> list[str]:
    handle = store.session("s")
    for n in range(40):
        handle.append({"role": "user", "blocks": [{"kind": "text", "text": f"turn {n}"}]})
    return [node.id for node in store.load_path_nodes("s")]


def test_a_full_id_or_any_unique_prefix_names_its_node(store: SessionStore, ids: list[str]) -> None:
    by_first: dict[str, list[str]] = defaultdict(list)
    for node_id in ids:
        by_first[node_id[0]].append(node_id)
        assert store.resolve_node_id("s", node_id) == node_id
        assert store.resolve_node_id("s", node_id[:12]) == node_id
    for first, named in by_first.items():
        if len(named) == 1:
            assert store.resolve_node_id("s", first) == named[0]


def test_an_ambiguous_prefix_lists_its_candidates(store: SessionStore, ids: list[str]) -> None:
    first = max("0123456789abcdef", key=lambda digit: sum(i.startswith(digit) for i in ids))
    expected = sorted(node_id for node_id in ids if node_id.startswith(first))
    assert len(expected) >= 2  # 40 ids over 16 digits
    with pytest.raises(AmbiguousNodeError) as caught:
        store.resolve_node_id("s", first)
    assert caught.value.candidates == expected[:10]
    assert f"the short id {first!r} is ambiguous" in str(caught.value)
    assert expected[0] in str(caught.value)
    assert isinstance(caught.value, UnknownNodeError)


@pytest.mark.parametrize("wanted", ["", "zz", "%", "_", "\x00", "\ud800"])
def test_a_prefix_no_id_starts_with_is_unknown(
    store: SessionStore, ids: list[str], wanted: str
) -> None:
    with pytest.raises(UnknownNodeError) as caught:
        store.resolve_node_id("s", wanted)
    assert not isinstance(caught.value, AmbiguousNodeError)
    with pytest.raises(UnknownNodeError):
        store.resolve_node_id("other", ids[0][:8])


def test_show_takes_a_short_leaf_id_in_a_real_process(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"

    def memstore(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "memstore.cli", "--db", db, *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    assert memstore("import", str(LEGACY / "branching.jsonl")).returncode == 0
    done = memstore("show", "branching", "--leaf", "35e37295", "--json")
    assert done.returncode == 0, done.stderr
    assert '"id": "35e3729593e09384f705b19d7b9d7588"' in done.stdout
    done = memstore("show", "branching", "--leaf", "3")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: session 'branching': the short id '3' is ambiguous: it starts ")
    assert "35e3729593e09384f705b19d7b9d7588" in line
