"""The plan contract: what a plan yields, what it receives back, and the markers it shares.

An operation is a *plan*: a generator that yields SQLAlchemy statements (or `Prepared` ones, the
hot paths' statements compiled once) and receives each one's (buffered) result. `SessionStore`
drives plans on a `Connection`, `AsyncSessionStore` on an `AsyncConnection`, each inside one
transaction, begun before the first statement that needs one (a `Prepared` statement `alone`
needs none: see `standalone`); a plan that raises rolls the transaction back. An error a
statement raises is thrown into the plan, which may clean up before it re-raises; a plan may
also end its transaction part-way (`COMMIT`, `ROLLBACK`: SQLite's chunked imports).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from enum import Enum
from typing import Any, Protocol, TypeAlias, TypeVar

from sqlalchemy import Executable

from memstore.store.copying import BulkRows
from memstore.store.prepared import Params, Prepared

__all__ = [
    "COMMIT",
    "ROLLBACK",
    "UNSET",
    "Boundary",
    "ConnectionStep",
    "Plan",
    "Step",
    "StepResult",
    "Unset",
    "as_call",
    "now_ms",
]

T = TypeVar("T")


class Boundary(Enum):
    """A step that ends the plan's transaction: the next statement begins another. Only SQLite's
    chunked imports yield them (see `memstore.store.importing`)."""

    COMMIT = "commit"
    ROLLBACK = "rollback"


COMMIT = Boundary.COMMIT
ROLLBACK = Boundary.ROLLBACK


class ConnectionStep:
    """A step the driver takes on its connection itself, not a statement: SQLite's progress
    handler for a time limit (`time_limits.SqliteTimeLimit`)."""


Step: TypeAlias = (
    Executable | tuple[Executable | Prepared, Params] | BulkRows | Boundary | ConnectionStep
)
"""A statement, or a statement and its parameters (a list of rows: executemany), an import's
rows (`BulkRows`: COPY on PostgreSQL), a transaction boundary, or a step on the connection."""


class StepResult(Protocol):
    """What a plan may ask of a step's result: SQLAlchemy's CursorResult, or the same calls on
    the rows of a statement the driver ran on its cursor (`prepared.PreparedRows`)."""

    def __iter__(self) -> Iterator[Any]: ...
    def first(self) -> Any: ...
    def one(self) -> Any: ...
    def all(self) -> Sequence[Any]: ...
    def scalar_one_or_none(self) -> Any: ...
    def scalars(self) -> Iterable[Any]: ...
    @property
    def rowcount(self) -> int: ...


Plan: TypeAlias = Generator[Step, StepResult, T]
"""Receives each statement's result, of one shape whichever way the driver ran it (a streamed
query's rows as an iterator)."""


class Unset:
    """The type of `UNSET`: an argument that was not given (None is a meaningful value)."""

    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        cls._instance = cls._instance or super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


def as_call(step: Step) -> tuple[Any, ...]:
    """The arguments of `connection.execute` for a step."""
    return step if isinstance(step, tuple) else (step,)


def now_ms() -> int:
    """The current time in epoch milliseconds."""
    return time.time_ns() // 1_000_000
