"""Opening: the constructor both stores share, its options written once.

`SessionStore` and `AsyncSessionStore` take the same options (migrators, auto_migrate,
read_only, schema, redact, tenant); only the engine differs (an `Engine` or an `AsyncEngine`),
and what opening does at once (the sync store migrates in its constructor; the async one when
it is first awaited, since a constructor cannot await). So the signature lives here, generic in
the engine, and each shell says how its engine is made (`_store_engine`) and what opening does
(`_opening`): an option added here reaches both stores, and mypy sees each store's own URL type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from memstore.redact import Redactor
from memstore.store.core import StoreCore
from memstore.store.engine import DEFAULT_URL, SCHEMA
from memstore.store.row_security import bind_tenant
from memstore.store.tables import DEFAULT_TENANT
from memstore.types import Migrator

if TYPE_CHECKING:
    from sqlalchemy import URL, Engine
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["Opening"]

EngineT = TypeVar("EngineT", bound="Engine | AsyncEngine")
"""The engine a store runs on (the async extra is imported only by the async store)."""


class Opening(StoreCore, Generic[EngineT]):
    """A store's constructor: its engine, its options, then what opening it does."""

    engine: EngineT

    def __init__(
        self,
        url: str | URL | EngineT = DEFAULT_URL,
        *,
        migrators: Sequence[Migrator] = (),
        auto_migrate: bool = True,
        read_only: bool = False,
        schema: str | None = None,
        redact: Redactor | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        """See the store's class docstring for what each option means."""
        self.engine = self._store_engine(url, schema=schema, read_only=read_only)
        try:
            super().__init__(
                self.engine.dialect.name,
                schema=self.engine.get_execution_options().get(SCHEMA),
                read_only=read_only,
                migrators=migrators,
                redact=redact,
                tenant=tenant,
            )
            bind_tenant(self.engine, self.tenant, handed_in=self.engine is url)
            self._opening(auto_migrate=auto_migrate)
        except BaseException:
            self._abandon()  # no connection left open behind a store that never opened
            raise

    def _store_engine(
        self, url: str | URL | EngineT, *, schema: str | None, read_only: bool
    ) -> EngineT:
        """The engine for `url` (or `url` itself, checked against `schema`)."""
        raise NotImplementedError

    def _opening(self, *, auto_migrate: bool) -> None:
        """What the constructor does once the options are set."""
        raise NotImplementedError

    def _abandon(self) -> None:
        """Release what the constructor took, when it fails."""
        raise NotImplementedError
