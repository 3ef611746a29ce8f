"""Statements that are a transaction of their own, run outside one: one round trip to the server
instead of three (BEGIN, the statement, COMMIT).

A plan marks such a statement `Prepared(..., alone=True)` when it is all or nothing by itself
and nothing else the plan writes needs to share its transaction (PostgreSQL's `memstore_append`,
`plans/one_call.py`). When the plan's connection has no transaction open (the statement is the
plan's first, or follows another one alone), the drivers run it here, in the driver connection's
autocommit mode (psycopg's): the server commits the statement when it ends, or rolls it back
when it fails. Inside a transaction (a caller's `store.transaction()`, a plan's earlier
statements) it joins that transaction like any other.

The connection goes back to the mode it had before the statement, so the pool hands out the
isolation level the engine was made with (an application's engine handed in too); one whose
mode cannot be restored, because the statement broke it, is invalidated rather than pooled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeGuard

from sqlalchemy import Connection, Dialect
from sqlalchemy.pool import PoolProxiedConnection

from memstore.store.prepared import Params, Prepared, PreparedRows

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["is_alone", "run_alone", "run_alone_async"]

_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE: no transaction, the connection sound


def is_alone(step: object) -> TypeGuard[tuple[Prepared, Params]]:
    """Whether `step` is a statement that may run outside a transaction (`Prepared.alone`)."""
    return isinstance(step, tuple) and isinstance(step[0], Prepared) and step[0].alone


def run_alone(
    connection: Connection | PoolProxiedConnection,
    dialect: Dialect,
    cursor: Any,
    prepared: Prepared,
    params: Params,
) -> PreparedRows:
    """Run `prepared` on `cursor` (of the DBAPI connection under `connection`: a Connection's,
    or one the pool lent without a Connection around it, see `sync.run`) in autocommit:
    psycopg's, or SQLAlchemy's adapter of its asyncio one (the async store runs `sync.run` in a
    greenlet)."""
    pooled = connection.connection if isinstance(connection, Connection) else connection
    driver: Any = pooled.dbapi_connection
    was = driver.autocommit
    driver.autocommit = True
    try:
        return prepared.run(cursor, dialect, params)
    finally:
        if driver.info.transaction_status == _IDLE:
            driver.autocommit = was
        else:  # broken: never back to the pool in autocommit
            connection.invalidate()


async def run_alone_async(
    connection: AsyncConnection, driver: Any, prepared: Prepared, params: Params
) -> PreparedRows:
    """Run `prepared` on `driver` (psycopg's asyncio connection under `connection`) in
    autocommit."""
    was = driver.autocommit
    await driver.set_autocommit(True)
    try:
        return await prepared.run_async(driver, connection.dialect, params)
    finally:
        if driver.info.transaction_status == _IDLE:
            await driver.set_autocommit(was)
        else:  # broken: never back to the pool in autocommit
            await connection.invalidate()
