"""What every command shares: the Typer apps, the consoles, the global options, opening the
store, the one error wrapper, JSON output and the small parsers and formatters of values.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from memstore import __version__
from memstore._package import DISTRIBUTION
from memstore.errors import InvalidArgumentError, MemstoreError
from memstore.store import DEFAULT_URL, SCHEMA_VARIABLE

if TYPE_CHECKING:
    from memstore.redact import Redactor
    from memstore.store import SessionInfo, SessionStore


P = ParamSpec("P")
R = TypeVar("R")


app = typer.Typer(
    name="memstore",
    help="A memory LLM agents can trust: branchable sessions in SQLite or PostgreSQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # a docstring's lines join into paragraphs, as in `--help`'s tests
)
db_app = typer.Typer(help="Create, upgrade or inspect the database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")


out = Console()
err = Console(stderr=True)


@dataclass
class Settings:
    """Options shared by every command."""

    db: str
    schema: str | None = None
    tenant: str = ""


def friendly_errors(command: Callable[P, R]) -> Callable[P, R]:
    """The one error wrapper of every command: a MemstoreError becomes one red line on stderr
    and exit status 1 (2 for arguments the library refuses, as for options Typer refuses)."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            result = command(*args, **kwargs)
            sys.stdout.flush()  # an output error (a full disk, a closed pipe) surfaces here
            return result
        except MemstoreError as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2 if isinstance(exc, InvalidArgumentError) else 1) from exc
        except OSError as exc:
            _drop_standard_output()
            err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from exc

    return run


def _drop_standard_output() -> None:
    """Point standard output at /dev/null, so that its unwritable buffer is not flushed again
    at exit (which would print a second error, with a traceback)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file (a test's capture): nothing will flush it at exit


TENANT_VARIABLE = "MEMSTORE_TENANT"
"""The environment variable naming the tenant every command works on (docs/tenants.md)."""
_TENANT_HELP = (
    "Work on this tenant's sessions only (default: memstore --tenant, else $MEMSTORE_TENANT, "
    "else the default tenant)."
)

TenantOption = Annotated[
    str | None,
    typer.Option("--tenant", metavar="NAME", help=_TENANT_HELP, show_default=False),
]
"""A command's own `--tenant`, which wins over the one given before the command (and over
MEMSTORE_TENANT): `memstore sql --tenant acme ...` and `memstore --tenant acme sql ...` agree."""


def open_store(
    ctx: typer.Context,
    *,
    tenant: str | None = None,
    auto_migrate: bool = True,
    read_only: bool = False,
    redact: Redactor | None = None,
) -> SessionStore:
    """The store named by `--db` / MEMSTORE_DB (and `--schema` / MEMSTORE_SCHEMA), on the
    tenant the command's `--tenant` names (`tenant`), else `memstore --tenant` /
    MEMSTORE_TENANT, else the default tenant. Commands that only read open it `read_only`:
    nothing is created or migrated, and a database that is not ready is one line saying what
    to run. `redact`: the store's redactor (`memstore.redact`).

    Raises:
        InvalidArgumentError: the tenant is not a tenant's name.
    """
    from memstore.store import SessionStore
    from memstore.store.tenancy import valid_tenant

    settings: Settings = ctx.obj
    tenant = valid_tenant(settings.tenant if tenant is None else tenant)  # before the database
    return SessionStore(
        settings.db,
        auto_migrate=auto_migrate,
        read_only=read_only,
        schema=settings.schema,
        redact=redact,
        tenant=tenant,
    )


def existing_session(store: SessionStore, session_id: str) -> SessionInfo:
    """The session every read names; one that does not exist is the same error for all of them.

    Raises:
        UnknownSessionError: no session `session_id`.
    """

    return store.session_info(session_id)


def json_record(value: Any) -> dict[str, Any]:
    """A dataclass (or dict) of memstore's as a `--json` object: keys in camelCase, as the JSONL
    files spell them (`createdAt`, `nodeId`); values, and keys inside them, as they are."""
    from pydantic.alias_generators import to_camel

    plain = dataclasses.is_dataclass(value) and not isinstance(value, type)
    items = dataclasses.asdict(value) if plain else dict(value)
    return {to_camel(key): item for key, item in items.items()}


def emit_json(value: Any) -> None:
    """Print a value as JSON for scripts (no colour, no wrapping): indented, or on one line when
    it nests deeper than the indenting encoder can go."""
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2)
    except RecursionError:
        from memstore import jsjson

        text = jsjson.dumps(value)  # iterative: any depth
    print(text)


def _print_version(requested: bool) -> None:
    if requested:
        print(f"memstore {__version__} (the {DISTRIBUTION} distribution)")
        raise typer.Exit()


@app.callback()
def options(
    ctx: typer.Context,
    db: Annotated[
        str,
        typer.Option(
            "--db",
            envvar="MEMSTORE_DB",
            help="Database URL: sqlite:///file.db or postgresql://host/db.",
            show_default=True,
        ),
    ] = DEFAULT_URL,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            envvar=SCHEMA_VARIABLE,
            help="PostgreSQL: the schema memstore's tables live in (default: the connection's "
            "current schema, usually public).",
            show_default=False,
        ),
    ] = None,
    tenant: Annotated[
        str,
        typer.Option(
            "--tenant",
            envvar=TENANT_VARIABLE,
            metavar="NAME",
            help="The tenant whose sessions every command works on (docs/tenants.md); a "
            "command's own --tenant wins. Default: the default tenant.",
            show_default=False,
        ),
    ] = "",
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """A memory LLM agents can trust: branchable sessions in SQLite or PostgreSQL."""
    ctx.obj = Settings(db=db, schema=schema or None, tenant=tenant)


def confirm(question: str, undone: str) -> None:
    """Ask `question` on a terminal; without one, refuse (nothing was `undone`) unless --yes."""
    if not sys.stdin.isatty():
        raise InvalidArgumentError(f"{question} Nothing was {undone}: pass --yes to confirm.")
    if not typer.confirm(question, default=False, err=True):
        raise typer.Exit(1)


def counted(n: int, noun: str, none: str) -> str:
    """'1 warning', '3 warnings', or `none` for zero."""
    if n == 0:
        return none
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def time_option(value: str | None, name: str, *, minimum: int | None = None) -> int | None:
    """A time given on the command line: epoch milliseconds, or an ISO date or time (UTC
    unless it names its zone), from `minimum` (default: the earliest a store holds).

    Raises:
        InvalidArgumentError: naming the option `name`, for neither or a time out of range.
    """
    from datetime import UTC, datetime

    from memstore.types import MAX_CREATED_AT, MIN_CREATED_AT

    if value is None:
        return None
    least = MIN_CREATED_AT if minimum is None else minimum
    problem = (
        f"{name} is epoch milliseconds or an ISO date or time (2026-12-01, "
        f"2026-12-01T10:00+01:00), not {value!r}"
    )
    if value.lstrip("-").isdigit():
        number = int(value)
    else:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidArgumentError(problem) from None
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        number = int(moment.timestamp() * 1000)
    if not least <= number <= MAX_CREATED_AT:
        raise InvalidArgumentError(
            f"{name}: {value!r} is out of range (epoch milliseconds from {least} to "
            f"{MAX_CREATED_AT})"
        )
    return number


NodeKey = tuple[str, str]
"""A node as (session id, node id)."""


def short_ids(store: SessionStore, wanted: Iterable[tuple[str, str | None]]) -> dict[NodeKey, str]:
    """Each (session, node id) pair's short id, unique in its session (a None id: no node)."""
    pairs = [(session_id, node_id) for session_id, node_id in wanted if node_id is not None]
    return store.short_node_ids_by_session(pairs) if pairs else {}


def shown_id(short: Mapping[NodeKey, str], session_id: str, node_id: str | None) -> str:
    """A node id as tables show it: its short form, or whole when it has none (or '')."""
    return "" if node_id is None else short.get((session_id, node_id), node_id)


LISTED_IDS = 8
"""How many of a session's node ids `prune` and `erase` name in their text reports."""


def listed_short_ids(store: SessionStore, nodes: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each session's node ids as `prune` and `erase` list them: the first `LISTED_IDS` by
    their short ids, then how many more (their `--json` lists every id)."""
    short = short_ids(
        store, [(session, node) for session, ids in nodes.items() for node in ids[:LISTED_IDS]]
    )
    listed = {}
    for session, ids in nodes.items():
        text = " ".join(shown_id(short, session, node) for node in ids[:LISTED_IDS])
        more = len(ids) - LISTED_IDS
        listed[session] = f"{text} and {more} more (--json lists them all)" if more > 0 else text
    return listed


def global_options_given(ctx: typer.Context) -> list[str]:
    """The options given before the command on its command line (`--db`, `--schema`,
    `--tenant`; not those read from the environment), to repeat in a command it suggests. A
    password in `--db` is shown as *** (the user fills it in, or sets MEMSTORE_DB)."""
    parent = ctx.parent
    if parent is None:
        return []
    given: list[str] = []
    for name, option in (("db", "--db"), ("schema", "--schema"), ("tenant", "--tenant")):
        source = parent.get_parameter_source(name)  # typer's own click's ParameterSource
        if source is not None and source.name == "COMMANDLINE":
            value = str(parent.params[name])
            if name == "db":
                from sqlalchemy.engine import make_url

                value = make_url(value).render_as_string(hide_password=True)
            given += [option, value]
    return given
