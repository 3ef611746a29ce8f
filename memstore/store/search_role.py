"""The role PostgreSQL's search runs as, so that it reads the full-text indexes for a login that
row-level security binds (migrations 0034 and 0036, docs/tenants.md).

`memstore_search_keys` (0034's `memstore_search_matches` before 0036) runs as its caller until it
is handed to a role with `BYPASSRLS`: then it runs as that role, which no policy binds, and keeps
the calling session's tenant (`memstore_tenant()`) itself. Making such a role takes a superuser,
so an operator does it once (`memstore db search-role`, or the SQL it prints); the role needs no
login, and no application login should be a member of it (a member may `SET ROLE` to it and read
every tenant).
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, Engine, text

from memstore.errors import InvalidArgumentError
from memstore.store.core import StoreCore
from memstore.store.operation import OnEngine, Program, operation
from memstore.store.policy import backend_of
from memstore.store.revision_scripts import revision_module

__all__ = ["SEARCH_ROLE", "SearchRole", "hand_search_to", "search_role_statements"]

SEARCH_ROLE = "memstore_search"
"""The role the search function is handed to by default (and by migration 0034, when it exists
and may read the schema)."""
_ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


def search_role_statements(role: str, schema: str) -> list[str]:
    """The SQL that makes `role` (if missing: `NOLOGIN`, `BYPASSRLS`) and hands it the search
    function of `schema`, in the order to run it.

    Raises:
        InvalidArgumentError: `role` is not a plain role name.
    """
    if not _ROLE_NAME.fullmatch(role):
        raise InvalidArgumentError(
            f"search role {role!r}: a role name here is up to 63 letters, digits, '_' and '$', "
            "starting with a letter or '_'"
        )
    make = (
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN "
        f'CREATE ROLE "{role}" NOLOGIN NOSUPERUSER BYPASSRLS; END IF; END $$'
    )
    attributes = f'ALTER ROLE "{role}" BYPASSRLS'  # one made before, without it
    hand_over: list[str] = revision_module("0036").hand_over(role, schema)
    return [make, attributes, *hand_over]


def hand_search_to(engine: Engine, role: str, *, run: bool) -> list[str]:
    """The statements that hand `engine`'s search function to `role`; with `run`, run in one
    transaction (which takes a superuser: only one may give a role `BYPASSRLS`).

    Raises:
        InvalidArgumentError: the database is not PostgreSQL, or `role` is not a role's name.
    """
    if backend_of(engine.dialect.name).one_file:
        raise InvalidArgumentError(
            "a search role is for PostgreSQL's row-level security; SQLite has none, and its "
            "search reads its index for every tenant already"
        )
    with engine.begin() as connection:
        schema = connection.execute(text("SELECT current_schema()")).scalar_one()
        statements = search_role_statements(role, schema)
        _refuse_a_role_of_another_owner(connection, role)
        if run:
            for statement in statements:
                connection.exec_driver_sql(statement)
    return statements


def _refuse_a_role_of_another_owner(connection: Connection, role: str) -> None:
    """Refuse a role that may read tables another login owns outside this schema: the function
    runs its schema owner's code as the role, through which that owner could read them.

    Raises:
        InvalidArgumentError: naming one such table and its owner.
    """
    other_owners = revision_module("0034").OTHER_OWNERS
    found = connection.execute(
        text(
            f"SELECT other.* FROM pg_roles r, LATERAL ({other_owners} LIMIT 1) other "
            "WHERE r.rolname = :role"
        ),
        {"role": role},
    ).first()
    if found is not None:
        raise InvalidArgumentError(
            f"search role {role!r} may already read {found.name}, which {found.owner!r} owns: "
            "the search function runs code of its schema's owner as the role, so that owner "
            f"could read {found.name} through it; hand each owner's schemas a role of their "
            "own (--role memstore_search_NAME)"
        )


class SearchRole(StoreCore):
    """Handing PostgreSQL's search to its role, as an operation of both stores."""

    @operation
    def hand_search_to_role(
        self, role: str = SEARCH_ROLE, *, run: bool = True
    ) -> Program[list[str]]:
        """Hand PostgreSQL's search function to `role`, made if missing with `BYPASSRLS`, so
        that a search reads the full-text indexes for a login that row-level security binds
        (docs/tenants.md); returns the SQL, run unless `run` is False (then only printed by
        `memstore db search-role --print`, for an operator to run). Running it takes a
        superuser.

        Raises:
            InvalidArgumentError: SQLite, or `role` is not a plain role name.
        """
        action = f"handing the search to the role {role!r}"
        if run:
            self._writable(action)
        return (yield from OnEngine(lambda engine: hand_search_to(engine, role, run=run), action))
