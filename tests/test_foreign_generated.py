"""pi sessions written by pi's own SessionManager (the npm package, run by node) import with the
tree pi's own reader builds, and export back byte for byte.

The package is installed once into `.cache/pi-agent` (git-ignored) by the first test that needs
it; without node and npm the tests skip, and under CI=true they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, NoReturn

import pytest

from memstore.foreign import agent_file
from memstore.store import SessionStore

REPO = Path(__file__).resolve().parents[1]
PI_PACKAGE = "@mariozechner/pi-coding-agent@0.73.1"
PI_DIR = REPO / ".cache" / "pi-agent"
SCRIPT = Path(__file__).parent / "pi_sessions.mjs"
MESSAGE_TYPES = {"message", "custom_message", "compaction", "branch_summary"}


def missing_tool(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, and CI=true")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pi_modules() -> Path:
    """node_modules holding pi's package, installed on first use."""
    modules = PI_DIR / "node_modules"
    if not (modules / "@mariozechner" / "pi-coding-agent" / "package.json").is_file():
        npm = shutil.which("npm")
        if npm is None or shutil.which("node") is None:
            missing_tool("node and npm are needed to run pi's SessionManager")
        PI_DIR.mkdir(parents=True, exist_ok=True)
        command = [npm, "install", "--prefix", str(PI_DIR), "--no-audit", "--no-fund", PI_PACKAGE]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            missing_tool(f"npm install {PI_PACKAGE} failed: {done.stderr[-2000:]}")
    return modules


def _node(modules: Path, *args: str) -> Any:
    done = subprocess.run(
        ["node", str(SCRIPT), str(modules), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def pi_files(pi_modules: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Format 3 sessions with branches, a compaction, a branch summary, labels and a name."""
    folder = tmp_path_factory.mktemp("pi-sessions")
    return [Path(path) for path in _node(pi_modules, "generate", str(folder))]


def _expected(tree: dict[str, Any]) -> tuple[set[tuple[str, str | None]], str | None]:
    """The (node, parent node) pairs and head that pi's tree implies: each message-like entry
    under the nearest message-like entry above it."""
    types = {entry["id"]: entry["type"] for entry in tree["entries"]}
    parents = {entry["id"]: entry["parentId"] for entry in tree["entries"]}

    def anchor(entry_id: str | None) -> str | None:
        while entry_id is not None and types[entry_id] not in MESSAGE_TYPES:
            entry_id = parents[entry_id]
        return entry_id

    pairs = {
        (entry_id, anchor(parents[entry_id]))
        for entry_id, kind in types.items()
        if kind in MESSAGE_TYPES
    }
    return pairs, anchor(tree["leaf"])


@pytest.mark.slow
def test_pi_sessions_import_with_the_tree_pis_reader_builds(
    pi_modules: Path, pi_files: list[Path], store: SessionStore, tmp_path: Path
) -> None:
    folder = pi_files[0].parent
    report = store.import_pi(folder)
    assert len(report.files) == len(pi_files)
    for path in pi_files:
        tree = _node(pi_modules, "tree", str(path))
        pairs, head = _expected(tree)
        graph = store.load_session(path.stem)
        assert {(node.id, node.parent) for node in graph.all()} == pairs
        assert store.head(path.stem) == head
        info = store.session_info(path.stem)
        assert info.title == tree["name"]
        assert set(info.tags) == set(tree["labels"].values())
        assert info.metadata.get("labels", {}) == tree["labels"]
        assert info.metadata["agent"] == "pi"
        assert info.metadata["sessionId"] == tree["header"]["id"]
        out = tmp_path / "out.jsonl"
        store.export_jsonl(path.stem, out)
        assert out.read_bytes() == path.read_bytes()


def test_pi_compactions_and_branch_summaries_become_summary_turns(
    pi_files: list[Path], store: SessionStore
) -> None:
    store.import_pi(pi_files[0])
    entries = [json.loads(line) for line in pi_files[0].read_text().splitlines()]
    compaction = next(entry for entry in entries if entry["type"] == "compaction")
    summary = store.load_session(pi_files[0].stem).get(compaction["id"])
    assert summary is not None
    assert summary.turn.to_json()["memstore"]["condensed"] == {
        "fromNodeId": compaction["parentId"],
        "cutNodeId": compaction["firstKeptEntryId"],
        "tokensBefore": 1234,
        "source": "pi",
    }
    branch = next(entry for entry in entries if entry["type"] == "branch_summary")
    hits = store.search("second approach", session_id=pi_files[0].stem)
    assert [hit.node_id for hit in hits] == [branch["id"]]
    image = store.read_only_query(
        f"SELECT count(*) FROM blocks WHERE kind = 'image' AND session_id = '{pi_files[0].stem}'"
    ).rows[0][0]
    assert image == 1
    failed = store.read_only_query(
        f"SELECT tool_name FROM tool_calls WHERE is_error = 1 AND session_id = '{pi_files[0].stem}'"
    ).rows
    assert [tuple(row) for row in failed] == [("bash",)]


def test_pi_usage_and_cost_are_rows_per_assistant_node(
    pi_files: list[Path], store: SessionStore
) -> None:
    store.import_pi(pi_files[1])
    rows = store.read_only_query(
        "SELECT count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
        f"sum(cost_usd), min(model) FROM node_usage WHERE session_id = '{pi_files[1].stem}'"
    ).rows[0]
    assert tuple(rows[:4]) == (30, 10 * 465, 5 * 465, 3 * 30)
    assert rows[4] == pytest.approx(0.001 * 465)
    assert rows[5] == "claude-sonnet-4-5"
    # The session ends on a model change: the head is the last message, the model the new one.
    assert store.session_info(pi_files[1].stem).metadata["modelId"] == "gpt-5"
    assert len(store.load_path(pi_files[1].stem)) == 60


def test_agent_file_names_the_session_folders_pi_makes(pi_modules: Path, tmp_path: Path) -> None:
    cwds = ["/work/demo", "/home/ü/my project:v2", "C:\\Users\\x", "relative/dir"]
    expected = [Path(folder).name for folder in _node(pi_modules, "folders", str(tmp_path), *cwds)]
    assert [agent_file(tmp_path, "pi", "s", {"cwd": cwd}).parent.name for cwd in cwds] == expected
