"""Imports that tell a file's format (`--from auto`, the default), refuse a file of another
format than asked (naming what it looks like) without creating a session, expand `~`, and
report a missing or unreadable path like a bad file while the others go on (issue 27)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memstore.cli import app
from memstore.store import SessionStore

from .conftest import LEGACY
from .foreign_lines import claude_code_lines, pi_lines, write_lines

runner = CliRunner()


def invoke(db: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", db, *args])
    return result.exit_code, result.stdout, result.stderr.replace("\n", "")


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """A folder holding a legacy file, a pi session and a Claude Code transcript."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "legacy.jsonl").write_bytes((LEGACY / "branching.jsonl").read_bytes())
    write_lines(folder / "pi.jsonl", pi_lines("p", 2))
    write_lines(folder / "claude.jsonl", claude_code_lines("c", 2))
    return folder


def test_import_tells_each_files_format_by_default(store: SessionStore, mixed: Path) -> None:
    report = store.import_files([mixed])
    assert report.failures == []
    nodes = {item.session_id: item.nodes for item in report.files}
    assert nodes == {"claude": 4, "legacy": 28, "pi": 8}
    assert {info.id: info.agent for info in store.sessions()} == {
        "claude": "claude-code",
        "legacy": "memstore",
        "pi": "pi",
    }


@pytest.mark.parametrize(
    ("source", "name", "looks_like"),
    [
        ("jsonl", "pi.jsonl", "looks like a pi session, not legacy JSONL: use --from pi"),
        ("jsonl", "claude.jsonl", "looks like a Claude Code transcript, not legacy JSONL"),
        ("pi", "legacy.jsonl", "looks like legacy JSONL, not a pi session: use --from jsonl"),
        ("claude-code", "pi.jsonl", "looks like a pi session, not a Claude Code transcript"),
    ],
)
def test_a_file_of_another_format_is_refused_and_makes_no_session(
    store: SessionStore, mixed: Path, source: str, name: str, looks_like: str
) -> None:
    report = store.import_files([mixed / name], source=source)
    (failure,) = report.failures
    assert str(failure) == f"{mixed / name}: {looks_like}" + str(failure).split(looks_like)[1]
    assert str(failure).endswith("or --from auto")
    assert store.list_sessions() == []
    report = store.import_files([mixed / name])  # the right import is not blocked
    assert report.failures == []
    assert report.files[0].nodes > 0


def test_the_cli_imports_a_mixed_folder_then_refuses_a_pi_file_as_legacy(
    sqlite_url: str, mixed: Path
) -> None:
    code, _, stderr = invoke(sqlite_url, "import", str(mixed))
    assert (code, stderr) == (0, "")
    code, _, stderr = invoke(sqlite_url, "import", "--from", "jsonl", str(mixed / "pi.jsonl"))
    assert code == 1
    assert f"{mixed / 'pi.jsonl'}: looks like a pi session, not legacy JSONL" in stderr


def test_an_empty_file_is_an_empty_legacy_session_but_not_an_agents(
    store: SessionStore, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    (refused,) = store.import_files([empty], source="pi").failures
    assert str(refused) == f"{empty}: empty, not a pi session: nothing to import"
    assert store.list_sessions() == []
    assert store.import_files([empty]).files[0].records == 0
    assert store.list_sessions() == ["empty"]


def test_a_missing_path_is_reported_and_the_others_import(
    store: SessionStore, tmp_path: Path, mixed: Path
) -> None:
    missing = tmp_path / "missing.jsonl"
    report = store.import_files([missing, Path("/dev/null"), mixed / "legacy.jsonl"])
    assert [str(failure) for failure in report.failures] == [
        f"{missing}: no such file or directory",
        "/dev/null: not a regular file but a character device: nothing to import",
    ]
    assert store.list_sessions() == ["legacy"]


def test_a_tilde_is_the_home_directory(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    write_lines(home / ".pi/agent/sessions/--w--/p.jsonl", pi_lines("p", 1))
    write_lines(home / ".claude/projects/-w/c.jsonl", claude_code_lines("c", 1))
    (home / "legacy.jsonl").write_bytes((LEGACY / "branching.jsonl").read_bytes())
    monkeypatch.setenv("HOME", str(home))
    assert os.path.expanduser("~") == str(home)
    store.import_pi("~/.pi/agent/sessions")
    store.import_claude_code("~/.claude/projects")
    store.import_jsonl("~/legacy.jsonl")
    assert store.list_sessions() == ["c", "legacy", "p"]
    assert store.import_files(["~/legacy.jsonl"]).files[0].unchanged
