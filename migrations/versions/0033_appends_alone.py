"""PostgreSQL: `memstore_append` is a transaction of its own: it sets its tenant and undoes a
refused call's writes itself (issue 33).

An append that writes nothing else is now the function's call alone, outside any transaction
(`memstore/store/standalone.py`): one round trip. Two things the surrounding transaction did
for the call, the function now does:

- The tenant. On an engine the application hands in, memstore set `memstore.tenant` per
  transaction (`row_security`), and a statement alone has none to set it in: the function sets
  it to the tenant it writes for, for its transaction only (`set_config(..., true)`), as its
  first statement, so the row-level security policies of 0031 hold its reads and writes to that
  tenant wherever it is called from. It changes nothing a login could not do itself: any login
  may set the setting, and one bound to a tenant by its name (0032) is held to that tenant
  whatever the setting says.
- Nothing written when it refuses. A refusal (a moved head, an unknown parent, a conflict, an
  import under way, a head to rehash) was answered after the session row's upsert, and after
  the nodes of a chain before a conflicting one; the caller's rollback undid them. Its
  statements now run in a block that a refusal leaves by an error the block catches (a
  subtransaction, undone), so the answer comes with nothing written, inside a transaction or
  alone.

SQLite: nothing. The downgrade puts 0030's function back.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

from memstore.store.revision_scripts import revision_module

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SET_TENANT = (
    "BEGIN\n"
    "    PERFORM set_config('memstore.tenant', "
    "CASE WHEN p_tenant = '' THEN '(default)' ELSE p_tenant END, true);\n"
    "    BEGIN  -- a block of its own: a refusal undoes what it wrote\n"
)
REFUSED = "RAISE SQLSTATE 'MSREF';"
"""Ends a refusal (its outcome set): the block's writes are undone, the outcome answered."""
OK_END = "    outcome := 'ok';\nEND\n$$"
CAUGHT = (
    "    outcome := 'ok';\n"
    "    EXCEPTION WHEN SQLSTATE 'MSREF' THEN NULL;  -- the outcome says which refusal\n"
    "    END;\n"
    "END\n$$"
)


def function() -> str:
    """0030's `memstore_append`, replacing it: the tenant set first, and the rest in a block
    that a refusal leaves by an error it catches, so that nothing the refused call wrote stays
    (the session row it made for a head check, the nodes of a chain before a conflict)."""
    previous = _previous()
    expected = previous.count("RETURN;") == REFUSALS and OK_END in previous
    if not expected or "\nBEGIN\n" not in previous:  # pragma: no cover - 0030's text is fixed
        raise AssertionError("memstore_append of revision 0030 is not as written")
    made = previous.replace("\nBEGIN\n", "\n" + SET_TENANT, 1).replace("RETURN;", REFUSED)
    return made.replace(OK_END, CAUGHT)


REFUSALS = 5  # importing, moved, rehash, unknown_parent, conflict


def _previous() -> str:
    """0030's `memstore_append`, as a CREATE OR REPLACE."""
    made = revision_module("0030").tenant_function()
    return str(made).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(function())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_previous())
