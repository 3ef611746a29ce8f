"""One naming convention for every command's `--json` output: camelCase keys, as in JSONL."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from typer.main import get_command
from typer.testing import CliRunner

from memstore import SessionStore
from memstore.cli import app

from .conftest import LEGACY

CAMEL = re.compile(r"[a-z][a-zA-Z0-9]*")

# The arguments each command with --json is run with, and the parts of its output that are the
# user's own (metadata, a query's columns, turns as stored), whose keys are printed as they are.
COMMANDS: dict[str, tuple[list[str], set[str]]] = {
    "db current": ([], set()),
    "import": ([str(LEGACY / "branching.jsonl")], set()),
    "sessions": ([], {"[].metadata"}),
    "tree": (["branching"], set()),
    "show": (["branching", "--last", "3"], {"[].turn"}),
    "search": (["the"], set()),
    "sql": (["SELECT id AS my_id FROM sessions"], {"[]"}),
    "stats": ([], set()),
    "compact": (["branching", "--keep-recent", "1"], set()),
    "prune": (["--older-than", "0s"], set()),  # a dry run: it reports, deletes nothing
    "erase": (["--session", "branching", "--reason", "a test"], set()),  # a dry run
    "erasures": ([], set()),  # the receipt the setup wrote
    "expiry set": (["branching", "--in", "30d"], set()),
    "expiry clear": (["branching"], set()),
    "expiry defaults": ([], set()),
    "tenants": ([], set()),
}


def _json_commands() -> list[str]:
    """Every command (subcommands included) that has a --json option."""
    found: list[str] = []

    def walk(command: Any, path: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, [*path, name])
        elif any("--json" in getattr(param, "opts", ()) for param in command.params):
            found.append(" ".join(path))

    walk(get_command(app), [])
    return sorted(found)


def _bad_keys(value: Any, user_parts: set[str], where: str = "") -> list[str]:
    if where in user_parts:
        return []
    if isinstance(value, list):
        return [bad for item in value for bad in _bad_keys(item, user_parts, f"{where}[]")]
    if not isinstance(value, dict):
        return []
    bad = [f"{where}.{key}" for key in value if not CAMEL.fullmatch(key)]
    for key, item in value.items():
        bad.extend(_bad_keys(item, user_parts, f"{where}.{key}" if where else key))
    return bad


def test_every_json_output_names_its_keys_in_camel_case(tmp_path: Path) -> None:
    assert sorted(COMMANDS) == _json_commands(), "a command with --json is not checked here"
    url = f"sqlite:///{tmp_path / 'json.db'}"
    with SessionStore(url) as store:
        store.import_jsonl(LEGACY / "branching.jsonl")
        store.update_session("branching", metadata={"snake_case": 1, "Any Key": {"x_y": 2}})
        store.erase(subject=("user_id", "nobody"), reason="a receipt", dry_run=False)
    runner = CliRunner()
    for command, (args, user_parts) in COMMANDS.items():
        result = runner.invoke(app, ["--db", url, *command.split(), "--json", *args])
        assert result.exit_code == 0, (command, result.stdout, result.stderr)
        output = json.loads(result.stdout)
        assert output, command
        assert _bad_keys(output, user_parts) == [], command


def _keys_holding(value: Any, wanted: str, user_parts: set[str], where: str = "") -> set[str]:
    """The keys (outside the user's own parts) whose value is `wanted`."""
    if where in user_parts:
        return set()
    if isinstance(value, list):
        return {k for item in value for k in _keys_holding(item, wanted, user_parts, f"{where}[]")}
    if not isinstance(value, dict):
        return set()
    found = {key for key, item in value.items() if item == wanted}
    for key, item in value.items():
        found |= _keys_holding(item, wanted, user_parts, f"{where}.{key}" if where else key)
    return found


def test_every_json_output_names_a_session_by_session_id(tmp_path: Path) -> None:
    """One key for a session's id in every command (`sessionId`, as the README documents), not
    `session` in one, `id` in another."""
    url = f"sqlite:///{tmp_path / 'json.db'}"
    with SessionStore(url) as store:
        store.import_jsonl(LEGACY / "branching.jsonl")
        store.erase(subject=("user_id", "nobody"), reason="a receipt", dry_run=False)
    runner = CliRunner()
    naming = set()
    for command, (args, user_parts) in COMMANDS.items():
        result = runner.invoke(app, ["--db", url, *command.split(), "--json", *args])
        assert result.exit_code == 0, (command, result.stdout, result.stderr)
        keys = _keys_holding(json.loads(result.stdout), "branching", user_parts)
        assert keys <= {"sessionId"}, (command, keys)
        if keys:
            naming.add(command)
    assert naming == {
        "import",
        "sessions",
        "tree",
        "search",
        "compact",
        "prune",
        "erase",
        "expiry set",
        "expiry clear",
    }
