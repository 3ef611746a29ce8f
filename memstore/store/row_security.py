"""PostgreSQL's row-level security, keyed by the store's tenant: the setting `memstore.tenant`.

Migration 0031 holds every row of memstore's tables to `tenant = memstore_tenant()`, the tenant
the setting names (`(default)` for the default tenant, ''; unset or '' names none, so shows no
row). memstore gives every transaction it runs the store's tenant, at the least cost:

- An engine the store made (`SessionStore(url)`) serves that store alone: each of its
  connections is given the tenant for its whole session when it connects
  (`tenant_of_connections`), so a transaction costs nothing more.
- An engine the application hands in may serve stores of several tenants (and the
  application's own queries): each transaction memstore begins on it sets the tenant for that
  transaction only (`set_config(..., true)`), as its first statement, in the `begin` event
  (`tenant_per_transaction`); when it ends, PostgreSQL drops the value, so the next transaction
  on that pooled connection, another tenant's or the application's, starts with none.

A connection learns its store's tenant from the execution option `TENANT`, which the stores put
on each connection they begin a transaction on; a connection whose session already carries that
tenant skips the statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import Connection

from memstore.errors import InvalidArgumentError
from memstore.store.policy import backend_of
from memstore.store.tables import DEFAULT_TENANT

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "SETTING",
    "TENANT",
    "bind_tenant",
    "copy_allowed",
    "refuse_another_logins_tenant",
    "setting_value",
    "tenant_of_connections",
    "tenant_per_transaction",
]

SETTING = "memstore.tenant"
"""The PostgreSQL setting the policies of migration 0031 read."""
DEFAULT_TENANT_VALUE = "(default)"
"""The setting's value for the default tenant (whose name, '', is the value of no tenant)."""
TENANT = "memstore_tenant"
"""Execution option naming the tenant whose rows a connection's transactions may see."""
_SESSION_TENANT = "memstore_session_tenant"  # in a pooled connection's info: its session's tenant
_COPY_ALLOWED = "memstore_copy_allowed"  # in its info: whether COPY FROM may write its tables
_SET_LOCAL = f"SELECT set_config('{SETTING}', %(tenant)s, true)"
_SET_SESSION = f"SELECT set_config('{SETTING}', %s, false)"


def setting_value(tenant: str) -> str:
    """The value of `memstore.tenant` that names `tenant`."""
    return DEFAULT_TENANT_VALUE if tenant == DEFAULT_TENANT else tenant


def _on_postgresql(engine: Engine) -> bool:
    return not backend_of(engine.dialect.name).one_file


def bind_tenant(engine: Engine | AsyncEngine, tenant: str, *, handed_in: bool) -> None:
    """Make every transaction a store runs on `engine` see `tenant`'s rows (PostgreSQL): for
    the whole session of each connection of an engine the store made, or per transaction on one
    `handed_in` by the application (see the module docstring).

    Raises:
        InvalidArgumentError: `engine`'s login is bound to another tenant by its name.
    """
    sync_engine = engine if isinstance(engine, Engine) else engine.sync_engine
    refuse_another_logins_tenant(sync_engine, tenant)
    if handed_in:
        tenant_per_transaction(sync_engine)
    else:
        tenant_of_connections(sync_engine, tenant)


def refuse_another_logins_tenant(engine: Engine, tenant: str, remedy: str = "") -> None:
    """Refuse a store of `tenant` over a login bound to another (a name with a `/`, migration
    0032): PostgreSQL would show it none of its rows and refuse every row it writes, and a
    query over it would read the login's tenant's rows as if they were `tenant`'s.

    Raises:
        InvalidArgumentError: naming the login's tenant (`remedy`: what to do instead).
    """
    login = engine.url.username
    if not _on_postgresql(engine) or login is None or "/" not in login:
        return
    bound = login.rsplit("/", 1)[1]
    if bound != tenant:
        raise InvalidArgumentError(
            f"login {login!r} is bound to tenant {bound!r} by its name (docs/tenants.md), "
            f"not to this store's tenant {tenant!r}: "
            + (remedy or f"open the store with tenant={bound!r}")
        )


def tenant_of_connections(engine: Engine, tenant: str) -> None:
    """Give each connection `engine` makes from now on `tenant` for its whole session (an
    engine of one store; see the module docstring). Nothing on SQLite."""
    if not _on_postgresql(engine):
        return
    value = setting_value(tenant)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(_SET_SESSION, (value,))
        cursor.close()
        dbapi_connection.commit()  # a rollback would undo it
        record.info[_SESSION_TENANT] = tenant

    tenant_per_transaction(engine)  # for a connection made before (none, in a new engine)


def tenant_per_transaction(engine: Engine) -> None:
    """Make each transaction begun on `engine` by a connection that names a tenant (`TENANT`)
    see that tenant's rows only, unless its session already does (once per engine; nothing on
    SQLite)."""
    if _on_postgresql(engine) and not event.contains(engine, "begin", _on_begin):
        event.listen(engine, "begin", _on_begin)


def _on_begin(connection: Connection) -> None:
    tenant = connection.get_execution_options().get(TENANT)
    if tenant is None or connection.connection.info.get(_SESSION_TENANT) == tenant:
        return
    connection.exec_driver_sql(_SET_LOCAL, {"tenant": setting_value(tenant)})


def copy_allowed(connection: Connection) -> bool:
    """Whether `COPY FROM` may write memstore's tables on this connection: PostgreSQL refuses it
    where the policies bind the login (the rows then go in by INSERT). Asked once per
    connection, once the tables exist."""
    info = connection.connection.info
    allowed = info.get(_COPY_ALLOWED)
    if allowed is None:
        active = connection.exec_driver_sql(_ROW_SECURITY_ACTIVE).scalar()
        allowed = not active
        if active is not None:  # the tables exist: the answer holds for this login
            info[_COPY_ALLOWED] = allowed
    return bool(allowed)


_ROW_SECURITY_ACTIVE = "SELECT row_security_active(to_regclass('nodes'))"
