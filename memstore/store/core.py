"""StoreCore: a store's settings and the requests its operations make, for `StoreBase`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from memstore.errors import ReadOnlyStoreError
from memstore.store.operation import Run
from memstore.store.plans import Plan
from memstore.store.policy import backend_of
from memstore.types import Migrator

__all__ = ["StoreCore"]

T = TypeVar("T")


class StoreCore:
    """What every operation may read of a store (no I/O): its backend and its options."""

    def __init__(
        self, dialect: str, *, schema: str | None, read_only: bool, migrators: Sequence[Migrator]
    ) -> None:
        self.backend = backend_of(dialect)
        self.dialect = dialect
        self.schema = schema
        self.read_only = read_only
        self.migrators = tuple(migrators)

    def _writable(self, action: str) -> None:
        """Refuse a write through a store opened for reading only."""
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{action}: this store was opened read-only (read_only=True); open it without "
                "read_only to write"
            )

    def _read(self, plan: Plan[T], action: str, *, files: bool = False) -> Run[T]:
        """The request to run a plan that only reads."""
        return Run(plan, action, files=files)

    def _write(self, plan: Plan[T], action: str, *, files: bool = False) -> Run[T]:
        """The request to run a plan that writes, refused at once by a read-only store."""
        self._writable(action)
        return Run(plan, action, write=True, files=files)
