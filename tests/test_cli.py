"""The command line, through Typer's runner and through a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from memstore.cli import app
from memstore.store.migrate import head_revision

from .conftest import LEGACY, LEGACY_FILES

runner = CliRunner()


def invoke(db: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", db, *args])
    return result.exit_code, result.stdout, result.stderr


def test_every_command_has_help_text() -> None:
    def walk(command: Any, path: str) -> None:
        assert command.help, f"{path} has no help"
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(get_command(app), "memstore")


def test_import_then_export_all_is_byte_identical(database_url: str, tmp_path: Path) -> None:
    code, stdout, _ = invoke(database_url, "import", str(LEGACY))
    assert code == 0
    assert "large-session" in stdout
    code, _, _ = invoke(database_url, "export", "--all", "-o", str(tmp_path / "out"))
    assert code == 0
    for path in LEGACY_FILES:
        assert (tmp_path / "out" / path.name).read_bytes() == path.read_bytes()


def test_import_json_report_parses_back(database_url: str) -> None:
    code, stdout, _ = invoke(database_url, "import", "--json", str(LEGACY / "branching.jsonl"))
    assert code == 0
    (item,) = json.loads(stdout)["files"]
    assert (item["session"], item["records"], item["nodes"]) == ("branching", 56, 28)
    code, stdout, _ = invoke(database_url, "import", "--json", str(LEGACY / "branching.jsonl"))
    assert json.loads(stdout)["files"][0]["unchanged"] is True


def test_a_bad_file_is_reported_and_the_others_still_import(
    sqlite_url: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope\n")
    code, stdout, stderr = invoke(sqlite_url, "import", str(bad), str(LEGACY / "unicode.jsonl"))
    assert code == 1
    assert "bad.jsonl:1: not valid JSON" in stderr
    assert "Traceback" not in stderr
    assert "unicode" in stdout


def test_export_needs_a_session_or_all(sqlite_url: str, tmp_path: Path) -> None:
    code, _, stderr = invoke(sqlite_url, "export", "-o", str(tmp_path / "x"))
    assert code == 2
    assert "--all" in stderr
    code, _, stderr = invoke(sqlite_url, "export", "nope", "-o", str(tmp_path / "x.jsonl"))
    assert code == 1
    assert stderr.strip() == "error: no session 'nope'"


def test_db_current_json(sqlite_url: str) -> None:
    code, stdout, _ = invoke(sqlite_url, "db", "current", "--json")
    assert code == 0
    assert json.loads(stdout) == {"current": None, "head": head_revision(), "up_to_date": False}


def test_demo_builds_sessions_and_is_repeatable(sqlite_url: str) -> None:
    for _ in range(2):
        code, stdout, _ = invoke(sqlite_url, "demo")
        assert code == 0, stdout
    assert "demo-config-parser" in stdout
    assert "◀ head" in stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--db", "mysql://x/y", "db", "current"], "unsupported database 'mysql'"),
        (["--db", "sqlite:////nonexistent-dir/x.db", "demo"], "unable to open database file"),
        (["import", "/nonexistent.jsonl"], "no such file or directory"),
    ],
)
def test_errors_are_one_line_in_a_real_process(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memstore.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ")
    assert message in line
