"""Tenants on the command line: `--tenant` (before or after the command) and MEMSTORE_TENANT
give every command one tenant's sessions, and two tenants holding the same session ids and
turns never cross through it (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from memstore import SessionStore
from memstore.cli import app

from .test_tenants import ACME, GLOBEX, fill, turn

runner = CliRunner()

DATABASE_WIDE = {"db upgrade", "db downgrade", "db current", "db search-role", "vacuum", "tenants"}
"""Commands that work on the whole database, not on a tenant's sessions."""


def run(url: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", url, *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def as_json(url: str, *args: str) -> Any:
    code, stdout, stderr = run(url, *args, "--json")
    assert code == 0, stderr
    return json.loads(stdout)


@pytest.fixture
def url(database_url: str) -> str:
    """A database where acme and globex hold the same sessions and turns; globex's `s1` has one
    turn more, which says 'zebra'."""
    with SessionStore(database_url, tenant=ACME) as acme:
        fill(acme)
    with SessionStore(database_url, tenant=GLOBEX) as globex:
        fill(globex)
        globex.append("s1", turn("user", "only globex knows zebra"))
    return database_url


def test_every_command_that_opens_a_store_takes_a_tenant() -> None:
    def walk(command: Any, path: str) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            names = {option for param in command.params for option in param.opts}
            assert ("--tenant" in names) == (path not in DATABASE_WIDE), path
            return
        for name, sub in subcommands.items():
            walk(sub, f"{path} {name}".strip())

    walk(get_command(app), "")


def test_listing_showing_and_searching_keep_to_the_tenant(url: str) -> None:
    acme = {row["sessionId"]: row for row in as_json(url, "sessions", "--tenant", ACME)}
    globex = {row["sessionId"]: row for row in as_json(url, "--tenant", GLOBEX, "sessions")}
    assert sorted(acme) == sorted(globex) == ["f1", "long", "s1", "s2"]
    assert (acme["s1"]["nodes"], globex["s1"]["nodes"]) == (2, 3)
    assert as_json(url, "sessions") == []  # the default tenant holds nothing
    code, stdout, _ = run(url, "show", "s1", "--tenant", ACME)
    assert code == 0
    assert "hi there" in stdout
    assert "zebra" not in stdout
    code, stdout, _ = run(url, "show", "s1", "--tenant", GLOBEX)
    assert "zebra" in stdout
    code, stdout, _ = run(url, "tree", "s1", "--tenant", ACME)
    assert code == 0
    assert "zebra" not in stdout
    assert as_json(url, "search", "zebra", "--tenant", ACME) == []
    assert [hit["sessionId"] for hit in as_json(url, "search", "zebra", "--tenant", GLOBEX)] == [
        "s1"
    ]
    assert (
        as_json(url, "stats", "--tenant", ACME)["nodes"] + 1
        == (as_json(url, "stats", "--tenant", GLOBEX)["nodes"])
    )
    by_model = as_json(url, "stats", "--by", "model", "--tenant", ACME)
    assert [row["key"] for row in by_model] == ["m"]


def test_exports_keep_to_the_tenant(url: str, tmp_path: Path) -> None:
    for tenant in (ACME, GLOBEX):
        code, _, stderr = run(
            url, "export", "--all", "-o", str(tmp_path / tenant), "--tenant", tenant
        )
        assert code == 0, stderr
        code, _, stderr = run(
            url, "--tenant", tenant, "export", "s1", "-o", str(tmp_path / f"{tenant}.html")
        )
        assert code == 0, stderr
    acme_files = sorted(path.name for path in (tmp_path / ACME).iterdir())
    assert acme_files == sorted(path.name for path in (tmp_path / GLOBEX).iterdir())
    assert len(acme_files) == 4
    assert "zebra" not in (tmp_path / ACME / "s1.jsonl").read_text()
    assert "zebra" in (tmp_path / GLOBEX / "s1.jsonl").read_text()
    assert "zebra" not in (tmp_path / f"{ACME}.html").read_text()
    assert "zebra" in (tmp_path / f"{GLOBEX}.html").read_text()


def test_imports_go_to_the_tenant(url: str, tmp_path: Path) -> None:
    code, _, _ = run(url, "--tenant", GLOBEX, "export", "s1", "-o", str(tmp_path / "s1.jsonl"))
    assert code == 0
    code, _, stderr = run(url, "import", str(tmp_path / "s1.jsonl"), "--tenant", "initech")
    assert code == 0, stderr
    assert [row["sessionId"] for row in as_json(url, "sessions", "--tenant", "initech")] == ["s1"]
    code, stdout, _ = run(url, "show", "s1", "--tenant", "initech")
    assert "zebra" in stdout
    assert as_json(url, "sessions", "--tenant", "initech2") == []
    assert len(as_json(url, "sessions", "--tenant", ACME)) == 4


def test_prune_erase_and_delete_keep_to_the_tenant(url: str) -> None:
    report = as_json(url, "prune", "--tag", "kept", "--yes", "--tenant", ACME)
    assert [session["sessionId"] for session in report["sessions"]] == ["s1"]
    assert "s1" in [row["sessionId"] for row in as_json(url, "sessions", "--tenant", GLOBEX)]
    erased = as_json(
        url, "erase", "--session", "s2", "--reason", "asked", "--yes", "--tenant", GLOBEX
    )
    assert erased["sessions"] == [{"sessionId": "s2", "nodeCount": 1}]
    assert "s2" in [row["sessionId"] for row in as_json(url, "sessions", "--tenant", ACME)]
    assert len(as_json(url, "erasures", "--tenant", GLOBEX)) == 1
    assert as_json(url, "erasures", "--tenant", ACME) == []
    code, _, _ = run(url, "delete", "long", "--yes", "--tenant", ACME)
    assert code == 0
    assert "long" in [row["sessionId"] for row in as_json(url, "sessions", "--tenant", GLOBEX)]


def test_the_environment_names_the_tenant_and_a_flag_wins(url: str) -> None:
    env = {"MEMSTORE_TENANT": GLOBEX}
    code, stdout, _ = run(url, "show", "s1", env=env)
    assert code == 0
    assert "zebra" in stdout
    code, stdout, _ = run(url, "--tenant", ACME, "show", "s1", env=env)
    assert code == 0
    assert "zebra" not in stdout
    code, stdout, _ = run(url, "--tenant", GLOBEX, "show", "s1", "--tenant", ACME, env=env)
    assert code == 0
    assert "zebra" not in stdout


@pytest.mark.parametrize("where", ["before", "after", "environment"])
def test_a_bad_tenant_is_one_clear_line(sqlite_url: str, where: str) -> None:
    bad = "has space"
    if where == "before":
        code, _, stderr = run(sqlite_url, "--tenant", bad, "sessions")
    elif where == "after":
        code, _, stderr = run(sqlite_url, "sessions", "--tenant", bad)
    else:
        code, _, stderr = run(sqlite_url, "sessions", env={"MEMSTORE_TENANT": bad})
    assert code == 2
    assert stderr.startswith("error: tenant 'has space' is not a tenant's name")
    assert len(stderr.strip().splitlines()) == 1


def test_tenants_lists_every_tenant_for_an_operator(url: str) -> None:
    with SessionStore(url) as default:
        default.append("mine", turn("user", "the default tenant's"))
    listed = as_json(url, "--tenant", ACME, "tenants")  # every tenant, whatever --tenant says
    assert [(row["tenant"], row["sessions"]) for row in listed] == [("", 1), (ACME, 4), (GLOBEX, 4)]
    code, stdout, _ = run(url, "tenants")
    assert code == 0
    assert GLOBEX in stdout
