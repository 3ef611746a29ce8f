"""A time limit on a plan's statements: a search never runs for ever.

PostgreSQL stops each statement past the limit itself (`SET LOCAL statement_timeout`, which the
end of the transaction undoes). SQLite has no such setting: the plan yields a `SqliteTimeLimit`
step, which the driver installs as the connection's progress handler (SQLite calls it every
`PROGRESS_STEPS` steps of a statement, and stops the statement when it answers 1), and a step
that takes it off again. The handler answers 1 only while its plan runs: a connection given back
to the pool with it still installed (a plan stopped by Ctrl-C or a cancelled task) is not stopped
by it later.
"""

from __future__ import annotations

import math
import time
from typing import TypeVar

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from memstore.errors import InvalidArgumentError, TimeLimitError
from memstore.store.plans.contract import ConnectionStep, Plan
from memstore.store.policy import Backend

__all__ = [
    "DEFAULT_SEARCH_SECONDS",
    "PROGRESS_STEPS",
    "SqliteTimeLimit",
    "check_seconds",
    "stopped_by_time_limit",
    "time_limited",
]

T = TypeVar("T")

DEFAULT_SEARCH_SECONDS = 10.0
"""How long a search may run unless its caller says otherwise (`timeout=None`: no limit)."""
PROGRESS_STEPS = 1000  # SQLite VM steps between two looks at the clock (microseconds apart)
_MAX_MILLISECONDS = 2**31 - 1  # the longest statement_timeout PostgreSQL takes (24 days)


def now() -> float:
    """The clock of SQLite's time limits (seconds; a test moves it)."""
    return time.monotonic()


class SqliteTimeLimit(ConnectionStep):
    """A plan step: SQLite's progress handler for a time limit (`handler` None: take it off)."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else now() + seconds
        self.active = seconds is not None
        self.expired = False

    @property
    def handler(self) -> SqliteTimeLimit | None:
        """What the driver installs as the progress handler (None: no handler)."""
        return self if self.active else None

    def __call__(self) -> int:
        if self.active and self.deadline is not None and now() > self.deadline:
            self.expired = True
            return 1
        return 0


def check_seconds(seconds: object, what: str) -> float | None:
    """A time limit in seconds: a positive number, or None for none.

    Raises:
        InvalidArgumentError: anything else (`what` names the limit in the message).
    """
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidArgumentError(f"{what} is seconds > 0 (or None), not {seconds!r}")
    if math.isnan(seconds) or seconds <= 0:
        raise InvalidArgumentError(f"{what} is seconds > 0 (or None), not {seconds!r}")
    return float(seconds)


def stopped_by_time_limit(error: object, elapsed: float, seconds: float) -> bool:
    """Whether PostgreSQL stopped a statement for its `statement_timeout` (`error` the driver's).

    It says "statement timeout", but has also been seen (once, in CI, in `memstore_search_keys`)
    to report such a statement as "canceling statement due to user request", the same SQLSTATE
    (57014, query_canceled): past the limit, that is taken for the limit too.
    """
    if "statement timeout" in str(error):
        return True
    return getattr(error, "sqlstate", None) == "57014" and elapsed >= seconds


def time_limited(plan: Plan[T], backend: Backend, seconds: float | None, stopped: str) -> Plan[T]:
    """`plan`, each of its statements stopped after `seconds` (None: no limit).

    Raises:
        TimeLimitError: a statement ran past the limit, with the message `stopped`.
    """
    if seconds is None:
        return (yield from plan)
    if backend.statement_timeout:
        milliseconds = min(_MAX_MILLISECONDS, max(1, math.ceil(seconds * 1000)))
        yield text(f"SET LOCAL statement_timeout = {milliseconds}")
        started = time.monotonic()
        try:
            return (yield from plan)
        except DBAPIError as exc:
            if stopped_by_time_limit(exc.orig, time.monotonic() - started, seconds):
                raise TimeLimitError(stopped) from exc
            raise
    limit = SqliteTimeLimit(seconds)
    yield limit
    try:
        result = yield from plan
    except DBAPIError as exc:
        limit.active = False
        yield SqliteTimeLimit(None)
        if limit.expired:
            raise TimeLimitError(stopped) from exc
        if "interrupted" in str(exc.orig):
            # Only the handler stops a statement, and it did not: Ctrl-C's KeyboardInterrupt
            # was raised inside it (where Python runs during the statement), which stops it too.
            raise KeyboardInterrupt from exc
        raise
    finally:
        limit.active = False  # whatever stopped the plan, the handler stops nothing more
    yield SqliteTimeLimit(None)
    return result
