"""Tenants: the one place that gives every statement of a plan its store's tenant.

Every table has a `tenant` column (migration 0028). A plan's statements name the tenant as the
bound parameter `tables.TENANT` (`of_tenant(table)` in a WHERE, `tenant=TENANT` in an INSERT's
values) and never its value: `scoped` adds the value to each statement's parameters as the store
drives the plan, so that a plan cannot pick another store's tenant, and a plan's author does
not thread it through.

The keys of every table lead with the tenant (migration 0030), so that a tenant's statements
read its part of each index, and two tenants may hold the same session ids and node ids.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import TextClause

from memstore.errors import InvalidArgumentError
from memstore.store.copying import BulkRows
from memstore.store.plans.contract import Boundary, ConnectionStep, Plan, Step
from memstore.store.tables import DEFAULT_TENANT, TENANT_KEY

__all__ = ["TENANT_NAME", "scoped", "valid_tenant"]

T = TypeVar("T")

TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}")
"""A tenant's name (the default tenant's is '')."""


def valid_tenant(tenant: object) -> str:
    """`tenant`, if it names a tenant.

    Raises:
        InvalidArgumentError: it is no string, or not a tenant's name (`TENANT_NAME`).
    """
    if not isinstance(tenant, str):
        raise InvalidArgumentError(f"tenant is a string, not {type(tenant).__name__}")
    if tenant != DEFAULT_TENANT and not TENANT_NAME.fullmatch(tenant):
        raise InvalidArgumentError(
            f"tenant {tenant[:80]!r} is not a tenant's name: up to 64 letters, digits and "
            "'_-.:@', starting with a letter or digit ('' is the default tenant)"
        )
    return tenant


def _with_tenant(step: Step, tenant: Mapping[str, str]) -> Step:
    """`step` with the tenant among its parameters (each row's, for several rows)."""
    if isinstance(step, Boundary | ConnectionStep):
        return step
    if isinstance(step, BulkRows):
        return BulkRows(step.insert, [{**row, **tenant} for row in step.rows])
    if isinstance(step, TextClause) and not step._bindparams:
        return step  # a setting (PRAGMA, SET LOCAL): it binds nothing
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
