"""The package as a new user meets it: its name, version, help screens and start-up cost."""

from __future__ import annotations

import ast
import itertools
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

import memstore
from memstore._package import DISTRIBUTION, extra_requirements, install_hint
from memstore.cli import app
from memstore.store import SessionStore

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("sqlalchemy", "alembic", "pydantic", "memstore.store.sync", "memstore.render")
WIDTH = 80


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )


def loaded_modules_after(code: str) -> set[str]:
    done = run_python(f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))")
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_distribution_has_its_own_name_version_license_and_urls() -> None:
    meta = metadata.metadata(DISTRIBUTION)
    assert meta["Name"] == DISTRIBUTION != "memstore"
    assert meta["Version"] == memstore.__version__
    assert meta["License-Expression"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    urls = dict(url.split(", ", 1) for url in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Repository", "Issues"} <= set(urls)


def test_typer_has_an_upper_bound() -> None:
    (typer,) = [r for r in metadata.requires(DISTRIBUTION) or [] if r.startswith("typer")]
    assert "<" in typer


def test_version_and_python_dash_m_in_a_real_process() -> None:
    for command in (["-m", "memstore", "--version"], ["-m", "memstore.cli", "--version"]):
        done = subprocess.run([sys.executable, *command], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"memstore {memstore.__version__} (the {DISTRIBUTION} distribution)\n"
    command = [sys.executable, "-m", "memstore", "--help"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0
    assert "Usage: python -m memstore" in done.stdout


def test_every_install_command_in_the_readme_names_this_distribution_or_a_local_path() -> None:
    commands = re.findall(r"pip install[^\n`#&|;]*", (ROOT / "README.md").read_text())
    assert commands
    for command in commands:
        targets = [word.strip("'\"") for word in command.split()[2:] if not word.startswith("-")]
        assert targets, command
        for target in targets:
            assert target.startswith((DISTRIBUTION, ".", "dist/")), command


def test_install_hints_name_the_extras_own_packages() -> None:
    assert extra_requirements("postgres") == ["psycopg[binary]>=3.1"]
    assert install_hint("postgres") == (
        f"pip install 'psycopg[binary]>=3.1' (the 'postgres' extra of {DISTRIBUTION})"
    )
    assert "aiosqlite" in install_hint("async")
    assert install_hint("no-such-extra") == f"pip install '{DISTRIBUTION}[no-such-extra]' " + (
        f"(the 'no-such-extra' extra of {DISTRIBUTION})"
    )


def every_command(command: Any = None, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    command = command or get_command(app)
    found = [path]
    for name, sub in getattr(command, "commands", {}).items():
        found += every_command(sub, (*path, name))
    return found


def help_screen(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.stdout


def description_lines(screen: str) -> list[str]:
    """The lines between the usage line and the first panel: the command's own description."""
    lines = screen.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next((i for i, line in enumerate(lines) if line.startswith("╭")), len(lines))
    return [line.rstrip() for line in lines[start:end]]


@pytest.mark.parametrize("path", every_command(), ids=lambda path: " ".join(path) or "memstore")
def test_help_screens_show_plain_flags_and_whole_sentences(path: tuple[str, ...]) -> None:
    screen = help_screen(path)
    assert "<bool>" not in screen
    lines = description_lines(screen)
    for line, following in itertools.pairwise(lines):
        if line and following:  # a wrapped paragraph: the next word did not fit on this line
            next_word = following.split()[0]
            assert len(line) + 1 + len(next_word) > WIDTH - 2, f"broken after {line!r}"
    words = screen.replace("│", " ").split()  # a wrapped metavar may interleave the help
    command: Any = get_command(app)
    for name in path:
        command = command.commands[name]
    for param in command.params:
        text = getattr(param, "help", None)
        if text:
            remaining = iter(words)
            assert all(word in remaining for word in text.split()), f"no help for {param.name}"


def test_import_memstore_loads_no_database_code() -> None:
    loaded = loaded_modules_after("import memstore")
    assert not {name for name in loaded if name.startswith(HEAVY)}
    loaded = loaded_modules_after("from memstore import SessionStore")
    assert {"sqlalchemy", "memstore.store.sync"} <= loaded


@pytest.mark.slow
def test_opening_an_up_to_date_store_loads_no_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'current.db'}"
    SessionStore(url).close()  # created and migrated here, in this process
    for read_only in (False, True):
        code = (
            f"from memstore import SessionStore\n"
            f"store = SessionStore({url!r}, read_only={read_only})\n"
            "assert store.list_sessions() == []\nstore.close()"
        )
        loaded = loaded_modules_after(code)
        assert "memstore.store.sync" in loaded
        assert not {name for name in loaded if name.startswith("alembic")}


def test_the_head_revision_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    from memstore.store.migrate import HEAD_REVISION, alembic_config

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


def test_include_object_for_an_applications_env_py_loads_no_database_code() -> None:
    loaded = loaded_modules_after("from memstore import include_object")
    assert "memstore.store.names" in loaded
    assert not {name for name in loaded if name.startswith(HEAVY)}


def test_help_loads_no_database_code() -> None:
    code = (
        "import sys\nsys.argv = ['memstore', '--help']\nfrom memstore.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    loaded = loaded_modules_after(code)
    assert not {name for name in loaded if name.startswith(HEAVY)}


def test_the_lazy_exports_are_the_names_type_checkers_see() -> None:
    tree = ast.parse(Path(memstore.__file__).read_text())
    (checking,) = [node for node in tree.body if isinstance(node, ast.If)]
    seen = {
        alias.name: node.module
        for node in checking.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == memstore._MODULE_OF
    for name, module in seen.items():
        assert getattr(memstore, name) is getattr(sys.modules[module or ""], name)


def test_a_missing_driver_names_the_packages_to_install() -> None:
    code = (
        "import sys\nsys.modules['psycopg'] = None  # as if the postgres extra were not installed\n"
        "from memstore import SessionStore, StoreError\n"
        "try:\n    SessionStore('postgresql://127.0.0.1:1/none')\n"
        "except StoreError as exc:\n    print(exc)"
    )
    message = run_python(code).stdout
    assert "needs the 'postgres' extra: pip install 'psycopg[binary]>=3.1'" in message
