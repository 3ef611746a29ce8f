"""Tenants: the one place that gives every statement of a plan its store's tenant.

Every table has a `tenant` column (migration 0028). A plan's statements name the tenant as the
bound parameter `tables.TENANT` (`of_tenant(table)` in a WHERE, `tenant=TENANT` in an INSERT's
values) and never its value: `scoped` adds the value to each statement's parameters as the store
drives the plan, so that a plan cannot pick another store's tenant, and a plan's author does
not thread it through.

So far every row is written with the store's tenant, which is always the default one: reads
filter by tenant, and the keys lead with it, in the next step (issue 31).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from memstore.store.copying import BulkRows
from memstore.store.plans.contract import Boundary, ConnectionStep, Plan, Step
from memstore.store.tables import TENANT_KEY

__all__ = ["scoped"]

T = TypeVar("T")


def _with_tenant(step: Step, tenant: Mapping[str, str]) -> Step:
    """`step` with the tenant among its parameters (each row's, for several rows)."""
    if isinstance(step, Boundary | ConnectionStep):
        return step
    if isinstance(step, BulkRows):
        return BulkRows(step.insert, [{**row, **tenant} for row in step.rows])
    if not isinstance(step, tuple):
        return step, tenant
    statement, params = step
    if isinstance(params, Mapping):
        return statement, {**params, **tenant}
    return statement, [{**row, **tenant} for row in params]


def scoped(plan: Plan[T], tenant: str) -> Plan[T]:
    """Run `plan` with `tenant` bound in every statement: each step it yields goes on with the
    tenant added, each result (or error) comes back to it as it is."""
    given = {TENANT_KEY: tenant}
    result: Any
    try:
        step = next(plan)
        while True:
            try:
                result = yield _with_tenant(step, given)
            except BaseException as error:  # the driver's error, for the plan to handle
                step = plan.throw(error)
            else:
                step = plan.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
