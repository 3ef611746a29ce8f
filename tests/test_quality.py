"""The code stays ruff-clean, formatted and mypy --strict clean: CI enforces it here."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"]],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_static_checks_pass(command: list[str]) -> None:
    done = subprocess.run(
        [str(BIN / command[0]), *command[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


MAX_MODULE_LINES = 450
"""A module of one concept fits in a few hundred lines (see ../shared/STYLE.md)."""
LONG_MODULES = {
    "memstore/blocks.py",
    "memstore/jsjson.py",
    "memstore/jsonl.py",
    "memstore/types.py",
}
"""The modules over `MAX_MODULE_LINES` still waiting to be split: this list only shrinks."""


def _modules() -> list[Path]:
    return sorted((ROOT / "memstore").rglob("*.py"))


def test_no_module_is_longer_than_a_concept_needs() -> None:
    lengths = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in _modules()
    }
    too_long = {name: lines for name, lines in lengths.items() if lines > MAX_MODULE_LINES}
    grown = sorted(f"{name} ({too_long[name]} lines)" for name in set(too_long) - LONG_MODULES)
    assert not grown, f"over {MAX_MODULE_LINES} lines, split them by concept: {grown}"
    short = sorted(name for name in LONG_MODULES if lengths.get(name, 0) <= MAX_MODULE_LINES)
    assert not short, f"no longer over {MAX_MODULE_LINES} lines, drop from LONG_MODULES: {short}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The memstore modules that module `name` (at `path`) imports anywhere: at the top, in a
    function (a deferred import hides a circle, it does not remove it) or for type checking."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module in known and module != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph`, or None."""
    done: set[str] = set()

    def walk(module: str, trail: list[str]) -> list[str] | None:
        if module in trail:
            return [*trail[trail.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph[module]):
            if cycle := walk(imported, [*trail, module]):
                return cycle
        done.add(module)
        return None

    return next((cycle for module in sorted(graph) if (cycle := walk(module, []))), None)


def test_no_memstore_modules_import_each_other_in_a_circle() -> None:
    """A circle makes the first import's outcome depend on which module was imported first."""
    paths = {_module_name(path): path for path in _modules()}
    graph = {name: _imports(path, name, set(paths)) for name, path in paths.items()}
    # A package imports its own modules; a module's import of its package is what Python does
    # first anyway: neither makes a circle by itself.
    for name in graph:
        graph[name] = {module for module in graph[name] if not name.startswith(module + ".")}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


BACKEND_NAMES = ("sqlite", "postgresql")


def test_only_the_backend_policy_tells_the_databases_apart_by_name() -> None:
    """What differs between SQLite and PostgreSQL is a trait of `store/policy.py`'s `Backend`,
    so a third backend is one more `Backend`: no other module compares a dialect's or a
    backend's name with a database's name."""
    found = []
    for path in sorted((ROOT / "memstore").rglob("*.py")):
        if path == ROOT / "memstore" / "store" / "policy.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            names = [side for side in sides if _is_name_attribute(side)]
            literals = [
                side
                for side in sides
                if isinstance(side, ast.Constant) and side.value in BACKEND_NAMES
            ]
            if names and literals:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "ask the Backend instead:\n" + "\n".join(found)


def _is_name_attribute(node: ast.expr) -> bool:
    """`<something>.name`, or a variable called `dialect`."""
    return (isinstance(node, ast.Attribute) and node.attr == "name") or (
        isinstance(node, ast.Name) and node.id == "dialect"
    )
