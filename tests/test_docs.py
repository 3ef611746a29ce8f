"""The documentation: its examples run, its generated pages are current, the README stays short.

Every ```python block of the README and of `docs/` runs here, page by page, in the order written
and in one namespace per page (as a reader types them into one session), on SQLite, in a scratch
folder whose home folder holds a pi and a Claude Code session (so `~/.pi/agent/sessions` is what
a user has), with API keys set as a user has them (no example calls a model over the network).
A block may `await` at its top level. A block is left out only when the line before it says why
(`<!-- no-run: REASON -->`).
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sqlite3
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memstore.cli import app
from scripts import gen_docs

from .foreign_lines import claude_code_lines, pi_lines, write_lines

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>\S*)")
NO_RUN = re.compile(r"<!-- no-run: .+ -->")


@dataclass(frozen=True)
class Example:
    """One fenced block of a page: where it starts, its language, its code, and whether it runs."""

    line: int
    language: str
    code: str
    runs: bool


def examples(page: Path) -> list[Example]:
    """The fenced blocks of `page`, each dedented by its fence's indentation."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[Example] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, start = len(opening["indent"]), index
        index += 1
        body: list[str] = []
        while not lines[index].strip().startswith("```"):
            body.append(lines[index][indent:])
            index += 1
        before = [line for line in lines[:start] if line.strip()]
        runs = not (before and NO_RUN.search(before[-1]))
        found.append(Example(start + 1, opening["info"], "\n".join(body) + "\n", runs))
        index += 1
    return found


def run_page(page: Path) -> None:
    """Run the page's Python examples in one namespace and one event loop."""
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    loop = asyncio.new_event_loop()
    try:
        for example in examples(page):
            if example.language != "python" or not example.runs:
                continue
            name = f"{page.relative_to(ROOT)}:{example.line}"
            code = compile(example.code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, namespace)
            if inspect.iscoroutine(result):
                loop.run_until_complete(result)
    finally:
        for value in namespace.values():  # stores the examples left open
            close = getattr(value, "close", None)
            if type(value).__name__ in ("SessionStore", "AsyncSessionStore") and close:
                outcome = close()
                if inspect.iscoroutine(outcome):
                    loop.run_until_complete(outcome)
        loop.close()


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_the_pages_python_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not any(e.language == "python" and e.runs for e in examples(page)):
        pytest.skip("no Python example on this page")
    home = tmp_path / "home"
    write_lines(home / ".pi/agent/sessions/--work-demo--/2025-12-04_abc.jsonl", pi_lines("abc", 2))
    claude = home / ".claude/projects/-work-demo/5f0c7a1e-0000-4000-8000-000000000001.jsonl"
    write_lines(claude, claude_code_lines("5f0c7a1e-0000-4000-8000-000000000001", 2))
    monkeypatch.setenv("HOME", str(home))
    for variable in ("MEMSTORE_DB", "MEMSTORE_SCHEMA", "MEMSTORE_READ_URL"):
        monkeypatch.delenv(variable, raising=False)
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):  # as a user has; no call is made
        monkeypatch.setenv(variable, "a-key-no-example-sends")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with warnings.catch_warnings():
        # The LangChain adapter's classes are deprecated upstream (the docs say so).
        warnings.filterwarnings("ignore", message=".*deprecated.*", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
        run_page(page)


def test_every_example_that_does_not_run_says_why() -> None:
    skipped = [
        f"{page.name}:{example.line}"
        for page in PAGES
        for example in examples(page)
        if example.language == "python" and not example.runs
    ]
    assert len(skipped) <= 1, skipped  # Alembic's env.py only; keep it that way


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for link in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+|[A-Z]+\.md)", readme):
        assert (ROOT / link).is_file(), link
    assert "../shared" not in readme


def test_the_sites_home_page_links_every_page_the_readme_does() -> None:
    """docs/index.md is the site's front door, as README.md is the repository's: it lacked
    the pages of usage, retention, erasure, redaction and tenants."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    wanted = set(re.findall(r"\]\(docs/([^)#]+\.md)", readme))
    linked = set(re.findall(r"\]\(([^)#/]+\.md)", home))
    assert sorted(wanted - linked) == []


def test_the_files_the_site_includes_link_nothing_by_a_relative_path() -> None:
    """A file a page includes whole (`--8<--`, CONTRIBUTING.md and CHANGELOG.md) is read from
    the repository's root on GitHub and from docs/ on the site: a relative link resolves in one
    of the two only (`mkdocs build --strict` refused CONTRIBUTING's `docs/frameworks.md`)."""
    for page in (ROOT / "docs").glob("*.md"):
        for included in re.findall(r'^--8<-- "([^"]+)"', page.read_text(encoding="utf-8"), re.M):
            text = (ROOT / included).read_text(encoding="utf-8")
            relative = [
                link
                for link in re.findall(r"\]\(([^)]+)\)", text)
                if not link.startswith(("http://", "https://", "mailto:", "#"))
            ]
            assert relative == [], included


def test_the_api_reference_documents_what_the_stores_take_and_return() -> None:
    """Each exported class a store method's signature names is in the API reference (the
    reports of erase, paging and usage were missing)."""
    import inspect

    import memstore

    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    named: set[str] = set()
    for method_name, method in inspect.getmembers(memstore.SessionStore, callable):
        if not method_name.startswith("_"):
            named |= set(re.findall(r"\w+", str(inspect.signature(method))))
    classes = {
        name
        for name in named & set(memstore.__all__)
        if inspect.isclass(getattr(memstore, name)) and not name.endswith("Error")
    }
    assert sorted(name for name in classes if f"::: memstore.{name}" not in page) == []


def test_every_page_is_in_the_site_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in (ROOT / "docs").rglob("*.md"):
        assert str(page.relative_to(ROOT / "docs")) in config, page


def unmapped_store_modules(page: str) -> list[str]:
    """The modules of `memstore/store/` that the architecture page does not name (one of
    `store/` by its file name, one of `plans/` by its name in the plans' entry)."""
    store = ROOT / "memstore" / "store"
    missing = [
        f"store/{path.name}"
        for path in sorted(store.glob("*.py"))
        if path.name != "__init__.py" and not re.search(rf"\b{re.escape(path.name)}", page)
    ]
    missing += [
        f"store/plans/{path.name}"
        for path in sorted((store / "plans").glob("*.py"))
        if path.name != "__init__.py" and not re.search(rf"\b{path.stem}\b", page)
    ]
    return missing


def test_the_architecture_page_maps_every_store_module() -> None:
    """A maintainer's map stays true of the code: a module added to the store is named there."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert unmapped_store_modules(page) == []
    assert unmapped_store_modules(page.replace("tenancy.py", "")) == ["store/tenancy.py"]


def test_the_docs_point_nowhere_outside_the_repository() -> None:
    for page in [*PAGES, ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "README.md"]:
        assert "../shared" not in page.read_text(encoding="utf-8"), page


def test_the_generated_pages_are_current() -> None:
    stale = gen_docs.stale_pages()
    assert not stale, f"stale: {stale}; run python scripts/gen_docs.py"


def test_a_changed_help_text_makes_the_cli_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    command = app.registered_commands[0]
    monkeypatch.setattr(command, "help", "What this command does, said differently.")
    assert [page.name for page in gen_docs.stale_pages()] == ["cli.md"]


def test_a_schema_change_makes_the_sql_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    migrate = gen_docs.migrated_database

    def with_one_more_column(path: Path) -> None:
        migrate(path)
        with sqlite3.connect(path) as connection:  # what a new migration would do
            connection.execute("ALTER TABLE nodes ADD COLUMN pinned INTEGER")

    monkeypatch.setattr(gen_docs, "migrated_database", with_one_more_column)
    assert [page.name for page in gen_docs.stale_pages()] == ["sql.md"]


def test_a_table_without_a_description_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    relations = {k: v for k, v in gen_docs.RELATIONS.items() if k != "node_usage"}
    monkeypatch.setattr(gen_docs, "RELATIONS", relations)
    with pytest.raises(ValueError, match="'node_usage' has no description"):
        gen_docs.render_schema()


def test_the_check_command_names_stale_pages(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gen_docs.main(["--check"]) == 0
    monkeypatch.setitem(gen_docs.GENERATED, "blocks", lambda: "changed")
    assert gen_docs.main(["--check"]) == 1
    assert "docs/turns.md is stale" in capsys.readouterr().out
