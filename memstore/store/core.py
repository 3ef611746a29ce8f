"""StoreCore: a store's settings and the requests its operations make, for `StoreBase`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from memstore.errors import ReadOnlyStoreError
from memstore.redact import Redactor, apply_redactor
from memstore.store.operation import Run
from memstore.store.plans import Plan
from memstore.store.policy import backend_of
from memstore.store.tables import DEFAULT_TENANT
from memstore.store.tenancy import valid_tenant
from memstore.types import Migrator, SessionNode, Turn, TurnLike, parse_turn

__all__ = ["StoreCore"]

T = TypeVar("T")


class StoreCore:
    """What every operation may read of a store (no I/O): its backend and its options."""

    def __init__(
        self,
        dialect: str,
        *,
        schema: str | None,
        read_only: bool,
        migrators: Sequence[Migrator],
        redact: Redactor | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        self.backend = backend_of(dialect)
        self.dialect = dialect
        self.schema = schema
        self.read_only = read_only
        self.migrators = tuple(migrators)
        self.redact = redact
        self.tenant = valid_tenant(tenant)
        """Whose rows the store reads and writes (`tenancy`): every plan runs scoped to it."""

    def _redacted(self, turns: Iterable[TurnLike]) -> Iterable[TurnLike]:
        """`turns` through the store's redactor (see `memstore.redact`), before they are
        hashed; as given without one, or when they are no list (the plan refuses them).

        Raises:
            InvalidTurnError: a turn (or what the redactor made of it) breaks the contract.
        """
        redact = self.redact
        if redact is None or isinstance(turns, str | bytes | Mapping | Turn):
            return turns
        return [apply_redactor(redact, parse_turn(turn)) for turn in turns]

    def _unredacted(self, node: SessionNode) -> str | None:
        """Why `node` cannot be stored as given, if the store's redactor changes its turn (its
        id is the content address of the turn as given, which the store must not keep); None
        when it does not, or the store has no redactor.

        Raises:
            InvalidArgumentError: the redactor fails or returns no turn.
        """
        if self.redact is None:
            return None
        turn = node.turn
        if apply_redactor(self.redact, turn).json_text() == turn.json_text():
            return None
        return (
            f"node {node.id!r}: the store's redactor changes its turn, and its id is the content "
            "address of the turn as given; append the turn with append() or append_many() "
            "(which hash the redacted turn), or build the node from the redacted turn"
        )

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
