"""Regenerate the documentation's generated parts from the code itself, or check they are current.

Three parts of the docs are not written by hand, so that they cannot drift from what they
describe: the block kinds' fields (read from `memstore.blocks`), every table and view with its
columns (read from a SQLite database migrated to the newest revision) and the command line
reference (read from the commands' own help). Each lives in a page between two markers:

    <!-- generated: NAME by scripts/gen_docs.py; edit the generator, not this part -->
    ...
    <!-- end generated: NAME -->

One part of the code is generated the same way, between `# generated: NAME ...` comments: the
package's public names are written once, as the imports of `memstore/__init__.py`, and its lazy
import table and `__all__` are derived from them.

    python scripts/gen_docs.py          # rewrite the generated parts
    python scripts/gen_docs.py --check  # exit 1, naming the stale pages, when any is out of date

`tests/test_docs.py` runs the check, so a migration, a new block kind or a changed help text that
is not regenerated fails the suite.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import re
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from typer.main import get_command

from memstore import SessionStore, parse_turn
from memstore.blocks import BLOCK_CLASSES, UnknownBlock, block_problem
from memstore.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE_INIT = ROOT / "memstore" / "__init__.py"

START = "<!-- generated: {name} by scripts/gen_docs.py; edit the generator, not this part -->"
END = "<!-- end generated: {name} -->"
CODE_START = "# generated: {name} by scripts/gen_docs.py from the imports above; do not edit"
CODE_END = "# end generated: {name}"

# One example of each block kind, checked against the kind's own rule when generating.
BLOCK_EXAMPLES: dict[str, str] = {
    "text": '{"kind": "text", "text": "Why does the upload test fail?"}',
    "thinking": '{"kind": "thinking", "text": "The timeout looks too short."}',
    "tool_call": (
        '{"kind": "tool_call", "id": "call-1", "name": "run_tests", '
        '"input": {"path": "tests/test_upload.py"}}'
    ),
    "tool_result": (
        '{"kind": "tool_result", "callId": "call-1", "output": "1 failed: timeout", '
        '"isError": true}'
    ),
    "image": '{"kind": "image", "mediaType": "image/png", "dataBase64": "iVBORw0KGgo="}',
}
UNKNOWN_EXAMPLE = '{"kind": "citation", "url": "https://example.org"}'

# What each table and view holds. A table or view a migration adds needs its line here: the
# generator refuses to describe a schema it has no words for.
RELATIONS: dict[str, str] = {
    "sessions": "One row per session: its head, title, metadata and times.",
    "session_tags": "A session's tags, one row each.",
    "nodes": "One row per node (a turn in a session's DAG): its parent and the turn's exact JSON.",
    "node_blocks": "One row per block of a turn: the columns looked up (kind, tool, call, error).",
    "records": "The session's log as the legacy JSONL file has it: node and head records.",
    "node_usage": "Tokens and cost per model call (appends, compaction, adapters, imports).",
    "node_keys": "A writer's key of a node (a Claude Agent SDK entry's uuid), unique per session.",
    "expiry_defaults": "How long after its last update a session expires: the store's, a tag's.",
    "erasures": "One receipt per erasure: when, what, why and counts (never the content).",
    "pruned_usage": "The usage of nodes a prune deleted from a kept session, summed per session, "
    "day, provider and model.",
    "summary_subjects": "Hashes of the subject fields of a summary's condensed turns that a "
    "prune deleted, for erasure by subject (no plaintext).",
    "nodes_fts": "The full-text index (FTS5) over `node_search`; its rowid is `nodes.pk`.",
    "nodes_fts_chars": "The full-text index of words in scripts written without spaces.",
    "nodes_fts_backlog": "Nodes that small writes added and `nodes_fts` does not hold yet.",
    "memstore_alembic_version": "memstore's schema revision (never Alembic's `alembic_version`).",
    "node_search": "Each node's search text, derived from `turn_json`.",
    "turns": "One row per node, with the text of its text blocks joined by newlines.",
    "turns_all": "`turns`, with the sessions still being imported.",
    "blocks": "One row per block of a turn, with its text, tool and values.",
    "blocks_all": "`blocks`, with the sessions still being imported.",
    "tool_calls": "One row per tool call, with its result when there is one.",
    "tool_calls_all": "`tool_calls`, with the sessions still being imported.",
    "session_stats": "One row per session: counts of nodes, turns, branches and tool calls.",
    "session_stats_all": "`session_stats`, with the sessions still being imported.",
    "session_sources": "One row per session: the agent it came from, its cwd, model and usage.",
    "session_sources_all": "`session_sources`, with the sessions still being imported.",
    "usage": "One row per node whose model call's usage is known: its session, time, day (UTC), "
    "role, provider, model, tokens and US dollars; and one per row of `pruned_usage` (no node, "
    "no time; `calls` says how many model calls it sums).",
}
FTS_SHADOW = re.compile(r"^nodes_fts(_chars)?_(data|idx|docsize|config|content)$")


def render_blocks() -> str:
    """A section per block kind: its docstring, its fields as validation reads them, an example."""
    out: list[str] = []
    for kind, cls in BLOCK_CLASSES.items():
        example = BLOCK_EXAMPLES[kind]
        problem = block_problem(json.loads(example))
        if problem is not None:
            raise ValueError(f"the example of {kind!r} is refused: {problem}")
        parse_turn({"role": "user", "blocks": [json.loads(example)]})  # validation agrees
        out += [f"### `{kind}`", "", _first_paragraph(cls.__doc__), ""]
        out += ["| field | required | type |", "|---|---|---|", "| `kind` | yes | `" + kind + "` |"]
        for field in cls.wire_fields():
            required = "yes" if field.required else "no (absent or `null`)"
            out.append(f"| `{field.key}` | {required} | {field.type_name} |")
        out += ["", "```json", example, "```", ""]
    out += ["### any other kind", "", _first_paragraph(UnknownBlock.__doc__), ""]
    out += ["```json", UNKNOWN_EXAMPLE, "```"]
    return "\n".join(out)


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def render_schema() -> str:
    """Every table and view of a SQLite database at the newest revision, with its columns."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "schema.db"
        migrated_database(path)
        connection = sqlite3.connect(path)
        try:
            relations = connection.execute(
                "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY type, name"
            ).fetchall()
            out: list[str] = []
            for heading, wanted in (("Tables", "table"), ("Views", "view")):
                out += [f"### {heading}", ""]
                for kind, name in relations:
                    if kind == wanted and not FTS_SHADOW.match(name):
                        out += _relation(connection, name)
        finally:
            connection.close()
    return "\n".join(out).rstrip()


def migrated_database(path: Path) -> None:
    """Make a SQLite database at `path` with the newest revision of the schema."""
    SessionStore(f"sqlite:///{path}").close()


def _relation(connection: sqlite3.Connection, name: str) -> list[str]:
    if name not in RELATIONS:
        raise ValueError(f"{name!r} has no description: add it to RELATIONS in {__file__}")
    out = [f"#### `{name}`", "", RELATIONS[name], "", "| column | type | not null | key |"]
    out.append("|---|---|---|---|")
    for _, column, kind, notnull, _, pk, hidden in connection.execute(
        f'PRAGMA table_xinfo("{name}")'
    ):
        if hidden == 1:  # an FTS5 table's own hidden columns
            continue
        key = "primary" if pk else ""
        out.append(f"| `{column}` | {kind.lower() or '-'} | {'yes' if notnull else ''} | {key} |")
    return [*out, ""]


def render_cli() -> str:
    """Each command's usage, help and options, read from the commands themselves."""
    out: list[str] = []
    for path, command in _commands(get_command(app), ["memstore"]):
        out += [f"### {' '.join(path)}", "", "```", _usage(path, command), "```", ""]
        out += [(command.help or "").strip(), "", *_options(command)]
    return "\n".join(out).rstrip()


def render_exports() -> str:
    """`memstore/__init__.py`'s lazy import table and `__all__`, from its imports: the names
    imported for the type checker (under TYPE_CHECKING) are loaded on first use, the names
    imported at the top are loaded with the package; both are exported, with `__version__`."""
    lazy: dict[str, list[str]] = {}
    eager: list[str] = ["__version__"]
    for node in ast.parse(PACKAGE_INIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if not isinstance(statement, ast.ImportFrom) or statement.module is None:
                    raise ValueError(f"line {statement.lineno}: only `from X import Y` here")
                lazy.setdefault(statement.module, []).extend(a.name for a in statement.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memstore"):
            eager.extend(alias.name for alias in node.names)
    out = ["_EXPORTED_FROM: dict[str, tuple[str, ...]] = {"]
    for module, names in lazy.items():
        if len(names) == 1:  # as ruff formats a tuple of one
            out.append(f'    "{module}": ("{names[0]}",),')
        else:
            out += [f'    "{module}": (', *(f'        "{name}",' for name in names), "    ),"]
    out += ["}", '"""Where each lazily exported name lives: importing memstore stays fast."""', ""]
    every = sorted({*eager, *itertools.chain.from_iterable(lazy.values())}, key=_export_order)
    out += ["__all__ = [", *(f'    "{name}",' for name in every), "]"]
    return "\n".join(out)


def _export_order(name: str) -> tuple[bool, str]:
    """Constants first, then the rest by name (ruff's order for `__all__`)."""
    return (not name.isupper(), name)


# Typer vendors its own click, so commands and parameters are read by their attributes.
def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    subcommands: dict[str, Any] = getattr(command, "commands", {})
    for name in sorted(subcommands):
        yield from _commands(subcommands[name], [*path, name])


def _usage(path: list[str], command: Any) -> str:
    words = [*path, "[OPTIONS]"]
    for param in command.params:
        if param.param_type_name == "argument":
            name = (param.name or "").upper() + ("..." if param.nargs == -1 else "")
            words.append(name if param.required else f"[{name}]")
    if hasattr(command, "commands"):
        words.append("COMMAND [ARGS]...")
    return " ".join(words)


def _options(command: Any) -> list[str]:
    rows = [
        f"| {_names(param)} | {_cell(_help(param))} |"
        for param in command.params
        if not getattr(param, "hidden", False)
        and param.name not in ("install_completion", "show_completion")
    ]
    if not rows:
        return []
    return ["| argument or option | meaning |", "|---|---|", *rows, ""]


def _names(param: Any) -> str:
    if param.param_type_name == "argument":
        return f"`{(param.name or '').upper()}`"
    names = " / ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
    if not param.is_flag:
        choices = getattr(param.type, "choices", None)
        metavar = "|".join(choices) if choices else METAVARS.get(param.type.name, "VALUE")
        names += f" `{metavar}`"
    return names


METAVARS = {"str": "TEXT", "path": "PATH", "int range": "N", "float range": "NUMBER"}


def _help(param: Any) -> str:
    text: str = getattr(param, "help", None) or ""
    if param.param_type_name == "option" and param.envvar:
        text += f" (environment: `{param.envvar}`)"
    shown = param.param_type_name == "option" and not param.is_flag
    if shown and param.default not in (None, "", ()) and not callable(param.default):
        text += f" (default: `{param.default}`)"
    return text


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


GENERATED: dict[str, Callable[[], str]] = {
    "blocks": render_blocks,
    "schema": render_schema,
    "cli": render_cli,
}
CODE_GENERATED: dict[str, Callable[[], str]] = {"exports": render_exports}


def regenerated(text: str, parts: dict[str, str], *, code: bool = False) -> str:
    """`text` with each generated part between its markers replaced by its current content
    (`code`: the markers of a Python file)."""
    for name, content in parts.items():
        start, end = (CODE_START, CODE_END) if code else (START, END)
        start, end = start.format(name=name), end.format(name=name)
        pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.DOTALL)
        for found in reversed(list(pattern.finditer(text))):
            part = f"{start}\n{content}\n{end}"
            text = text[: found.start()] + part + text[found.end() :]
    return text


def pages() -> list[Path]:
    """The pages that hold at least one generated part."""
    return sorted(path for path in DOCS.rglob("*.md") if "<!-- generated: " in path.read_text())


def _current() -> Iterator[tuple[Path, str, str]]:
    """Each file holding generated parts: its text now, and with its parts regenerated."""
    parts = {name: render() for name, render in GENERATED.items()}
    for page in pages():
        text = page.read_text()
        yield page, text, regenerated(text, parts)
    code_parts = {name: render() for name, render in CODE_GENERATED.items()}
    text = PACKAGE_INIT.read_text()
    yield PACKAGE_INIT, text, regenerated(text, code_parts, code=True)


def stale_pages() -> list[Path]:
    """The files whose generated parts differ from what the code generates now."""
    return [page for page, text, new in _current() if new != text]


def regenerate() -> list[Path]:
    """Rewrite every stale file; returns the files rewritten."""
    rewritten = []
    for page, text, new in _current():
        if new != text:
            page.write_text(new)
            rewritten.append(page)
    return rewritten


def main(argv: list[str] | None = None) -> int:
    """The command line: regenerate, or with --check only report stale pages."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only check, exit 1 if stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages()
        for page in stale:
            print(f"{page.relative_to(ROOT)} is stale: run python scripts/gen_docs.py")
        return 1 if stale else 0
    for page in regenerate():
        print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
